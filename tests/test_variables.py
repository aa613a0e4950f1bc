"""docs/variables.md lists every ``COURSE_*`` environment variable the code uses, and only those (issue 47, item 6).

tools/maintainers/course_variables.py finds the variables (its docstring states the rule that tells them from Python constants
such as ``COURSE_DIR = course_root()``); these tests hold the table to it and show that the check fails on a
variable planted in a scratch tree.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tool_modules import load_tool  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


course_variables = load_tool("course_variables")


def test_the_table_lists_every_variable_and_only_those() -> None:
    """Missing rows, stale rows, read-by paths that do not exist, unclassified COURSE_* words: none
    (``.venv/bin/python tools/maintainers/course_variables.py --check`` says the same)."""
    assert course_variables.problems(ROOT) == []


def test_the_constants_are_not_variables_of_their_own() -> None:
    found = course_variables.scan(ROOT)
    assert set(found) == set(course_variables.table(ROOT))
    for name in ("COURSE_HOROVOD_ENV", "COURSE_TITLE", "COURSE_LIMIT_MIN"):
        assert name not in found
    # COURSE_DIR is lab.py's constant and, separately, the cluster scripts' variable.
    assert "course_lib/environment/lab.py" not in found["COURSE_DIR"]
    assert "cluster/mpirun_horovod.sh" in found["COURSE_DIR"]


def test_the_rule_in_python() -> None:
    source = '''"""A docstring naming $COURSE_DOC is not a use."""
import os
__all__ = ["COURSE_EXPORTED"]
MARKER = "COURSE_NAMED"
COURSE_CONSTANT = 3
os.environ.get("COURSE_READ")
os.environ[MARKER + "_OF"] = "w"
env = {"COURSE_KEY": "1"}
remedy = f"COURSE_REMEDY=1 make setup ({COURSE_CONSTANT})"
help = "default: $COURSE_HELP"
def f(monkeypatch):
    """${COURSE_DOC2} neither."""
    monkeypatch.setenv("COURSE_SET", "1")  # COURSE_COMMENT=1 is a comment
'''
    assert course_variables.python_variables(source) == {
        "COURSE_NAMED", "COURSE_NAMED_OF", "COURSE_READ", "COURSE_KEY", "COURSE_REMEDY", "COURSE_HELP", "COURSE_SET"}


def test_the_rule_in_shell() -> None:
    source = ('VENV=${COURSE_A:-$ROOT/.venv}\n[ "$COURSE_B" = 1 ]\nexport COURSE_C := $(abspath x)\n'
              '# COURSE_COMMENTED=1 says a comment\n\t$(COURSE_E)/bin/jupyterhub\n\tCOURSE_F=1 make x  # COURSE_G=1\n'
              'echo COURSE_WORD\n[ ${#missing[@]} -gt 0 ]\n')
    assert course_variables.shell_variables(source) == {"COURSE_A", "COURSE_B", "COURSE_C", "COURSE_E", "COURSE_F"}


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A scratch course tree: this checkout's table, and one module that reads a variable the table lacks."""
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "variables.md", tmp_path / "docs" / "variables.md")
    (tmp_path / "course_lib").mkdir()
    (tmp_path / "course_lib" / "planted.py").write_text('import os\n\nPLANTED = os.environ.get("COURSE_PLANTED")\n')
    return tmp_path


def test_the_check_reports_a_planted_variable(scratch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert course_variables.scan(scratch) == {"COURSE_PLANTED": ["course_lib/planted.py"]}
    assert any(line.startswith("missing from docs/variables.md: COURSE_PLANTED (used in course_lib/planted.py)")
               for line in course_variables.problems(scratch))
    assert course_variables.main(["--check", "--root", str(scratch)]) == 1
    out = capsys.readouterr().out
    assert "missing from docs/variables.md: COURSE_PLANTED" in out
    # The scratch tree has none of the course's code: every real row is stale there.
    assert "stale in docs/variables.md: COURSE_GPU" in out


def test_the_check_reports_stale_rows_bad_paths_and_unclassified_words(scratch: Path) -> None:
    table = scratch / "docs" / "variables.md"
    table.write_text("| Variable | Who | Read by | What |\n|---|---|---|---|\n"
                     "| `COURSE_PLANTED` | tests | `course_lib/planted.py` | planted |\n")
    assert course_variables.problems(scratch) == []
    table.write_text(table.read_text() + "| `COURSE_GONE` | tests | `course_lib/gone.py` | gone |\n")
    (scratch / "course_lib" / "constant.py").write_text("COURSE_MYSTERY = 3\n")
    found = course_variables.problems(scratch)
    assert any(line.startswith("stale in docs/variables.md: COURSE_GONE") for line in found)
    assert any("COURSE_GONE's row names course_lib/gone.py, which does not exist" in line for line in found)
    assert any(line.startswith("unclassified: COURSE_MYSTERY in course_lib/constant.py") for line in found)
