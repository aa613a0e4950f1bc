"""The copy-to-your-cluster script: the plain Keras script plus exactly the Horovod lines.

``source_code/horovod_fmnist_minimal.py`` must run under ``horovodrun -np 2`` with no course_lib,
end with identical weights on both ranks, and differ from ``source_code/keras_fmnist.py`` only by
lines that say why they are there (``# Horovod``), with the five changes numbered 1/5 … 5/5.
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLAIN = ROOT / "source_code" / "keras_fmnist.py"
MINIMAL = ROOT / "source_code" / "horovod_fmnist_minimal.py"
COURSE = ROOT / "source_code" / "horovod_fmnist.py"
TINY = ["--epochs", "1", "--train-subset", "512", "--test-subset", "256", "--batch-size", "64"]
# The model must be seen to learn in TINY's budget (1 epoch: 4 steps of 2 x 64 images, Adam at
# 2e-3). Measured on the 2-core machine (2026-11-21), seeds 1, 2, 3, 42: test accuracy 0.484,
# 0.574, 0.391, 0.645 (chance 0.10) and test loss 1.43, 1.35, 1.65, 1.35, down from
# ln(10) = 2.30 for the untrained model's near-uniform guess. The plain script alone (8 steps of
# 64, Adam 1e-3), seeds 1, 2, 3: accuracy 0.543, 0.598, 0.508, test loss 1.29, 1.29, 1.25.
# Thresholds with margin, for both:
MIN_ACCURACY, MAX_TEST_LOSS = 0.25, 0.85 * math.log(10)


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


# The minimal script's real 2-worker run (identical weights on both ranks, learning above these thresholds) is
# notebook 03's exercise 3 (its solution run prints those verdicts, compared by nbval; the thresholds below are checked
# in its committed output by tests/test_exercises.py::test_03_notebook_shows_the_solution_runs_verdicts; issue 31).
# The plain script's own run (it runs with no Horovod line and learns above these thresholds, TINY) is
# tests/test_exercises.py::test_plain_script_runs_unchanged_and_learns: rank 0 of the launch that also shows the
# coding self-check rejecting the plain script unchanged, checked once (issue 31).
