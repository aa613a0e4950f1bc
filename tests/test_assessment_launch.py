"""The code task graded for real (issue 55): the reference solution launched at 2 workers gets every code point;
the learner edition's starter, and the course's own Horovod script, get none of the data-parallel parts.

Each test is one real launch through the course's launcher (the grader's own ``grade_code``), at the grader's
arguments; the time limit is the pilot's (assessment/pilot.json) scaled by this machine's speed probe.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.assessment import spec
from course_lib.assessment.code import grade_code
from course_lib.assessment.release import release

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "instructor" / "assessment" / "tape_fmnist_solution.py"

pytestmark = [pytest.mark.horovod, pytest.mark.slow, pytest.mark.requires("horovodrun")]


def released_starter(tmp_path: Path) -> Path:
    """The script the learner's copy of the notebook writes before any edit (its ``%%writefile`` cell)."""
    nb = release(nbformat.read(ROOT / "assessment" / "source" / "ddp" / "assessment.ipynb", as_version=4))
    cell = next(c for c in nb.cells if c.source.startswith("%%writefile tape_fmnist.py"))
    path = tmp_path / "tape_fmnist.py"
    path.write_text(cell.source.split("\n", 1)[1] + "\n")
    return path


def test_the_reference_solution_gets_every_code_point() -> None:
    grade = grade_code(SOLUTION)
    assert all(part.passed for part in grade.parts.values()), grade.summary()
    assert sum(p.points for p in grade.parts.values()) == sum(v for k, v in spec.POINTS.items() if k.startswith("code_"))


def test_the_learner_editions_starter_fails(tmp_path: Path) -> None:
    grade = grade_code(released_starter(tmp_path))
    assert sum(p.points for p in grade.parts.values()) == 0, grade.summary()
    assert "ranks" in grade.parts["code_weights"].reason  # both processes said they were rank 0


def test_the_courses_own_horovod_script_does_not_pass(tmp_path: Path) -> None:
    """The closest script the learner edition ships: a Keras fit loop, not the task's (no lr events, no progress
    line with --json)."""
    grade = grade_code(ROOT / "source_code" / "horovod_fmnist.py")
    assert not all(part.passed for part in grade.parts.values())
    assert not grade.parts["code_lr_rule"].passed


def test_the_starter_file_is_the_notebooks_cell() -> None:
    nb = nbformat.read(ROOT / "assessment" / "source" / "ddp" / "assessment.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "code-script")
    assert cell.source.split("\n", 1)[1].strip() == (ROOT / "assessment" / "starter_tape_fmnist.py").read_text().strip()
    assert subprocess.run([sys.executable, "-m", "py_compile", str(SOLUTION)]).returncode == 0
