"""The copy-to-your-cluster script: the plain Keras script plus exactly the Horovod lines.

``source_code/horovod_fmnist_minimal.py`` must run under ``horovodrun -np 2`` with no course_lib,
end with identical weights on both ranks, and differ from ``source_code/keras_fmnist.py`` only by
lines that say why they are there (``# Horovod``), with the five changes numbered 1/5 … 5/5.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLAIN = ROOT / "source_code" / "keras_fmnist.py"
MINIMAL = ROOT / "source_code" / "horovod_fmnist_minimal.py"
COURSE = ROOT / "source_code" / "horovod_fmnist.py"
TINY = ["--epochs", "1", "--train-subset", "512", "--test-subset", "256", "--batch-size", "64"]


def _code_lines(path: Path) -> list[str]:
    """The script's lines after its docstring (the docstrings are meant to differ)."""
    text = path.read_text()
    return text[text.index('"""', 3) + 3:].splitlines()


def test_the_minimal_script_adds_only_horovod_lines() -> None:
    diff = list(difflib.unified_diff(_code_lines(PLAIN), _code_lines(MINIMAL), lineterm="", n=0))
    plain = {line.strip() for line in _code_lines(PLAIN)}
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    assert added, "the scripts are identical"
    added = [line for line in added if line.strip() not in plain]  # re-indented, not new
    # An added line either says "# Horovod" or continues a statement that does (a multi-line call).
    unexplained = [line for line in added
                   if "Horovod" not in line and not line.strip().startswith(("]", ")"))
                   and "hvd." not in line and "help=" not in line]
    assert not unexplained, f"lines added without a '# Horovod' reason: {unexplained}"
    assert "import course_lib" not in MINIMAL.read_text() and "from course_lib" not in MINIMAL.read_text()


@pytest.mark.parametrize("path", [MINIMAL, COURSE], ids=["minimal", "course"])
def test_the_five_changes_are_numbered_in_order(path: Path) -> None:
    numbers = [int(n) for n in re.findall(r"# Horovod \((\d)/5\)", path.read_text())]
    # Each change appears at least once, and the first time each appears they come in order.
    first = sorted(set(numbers), key=numbers.index)
    assert first == [1, 2, 3, 4, 5], f"{path.name}: numbered changes in order {first}"


@pytest.mark.horovod
def test_minimal_script_two_workers_end_with_identical_weights() -> None:
    from course_lib.runner import launch

    result = launch.run_horovod(MINIMAL, 2, TINY, timeout=300, show="all", output=lambda line: None,
                                python=sys.executable, cwd=ROOT)
    assert result.returncode == 0
    digests = result.digests
    assert sorted(digests) == [0, 1], digests
    assert digests[0] == digests[1], "the two workers ended with different weights"
    assert result.result is not None and result.result["workers"] == 2
    assert result.result["test_accuracy"] > 0.5, result.result  # well above chance (0.1) after 1 epoch


@pytest.mark.horovod
def test_plain_script_runs_alone() -> None:
    from course_lib.runner import launch

    result = launch.run_python(PLAIN, TINY, timeout=300, output=lambda line: None, cwd=ROOT)
    assert result.returncode == 0 and result.result["workers"] == 1
