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
    # Both processes think they are rank 0: their digests, or (when their checkpoints race in one folder) the crash.
    assert "ranks" in grade.parts["code_weights"].reason or "the run failed" in grade.parts["code_weights"].reason


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


def _solved_learner_copy(edition: Path) -> Path:
    """The learner edition's notebook answered as the reference solution answers it: the code cell holds the
    solution script, the other answer cells the source's solution code."""
    source = nbformat.read(ROOT / "assessment" / "source" / "ddp" / "assessment.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    path = edition / "assessment" / "ddp" / "assessment.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.get("id") == "code-script":
            cell.source = "%%writefile tape_fmnist.py\n" + SOLUTION.read_text()
        elif grade_id in answers and cell.cell_type == "code":
            cell.source = answers[grade_id]
        elif grade_id == "written_answer":
            cell.source = "The all-reduce and the wait for the slower worker."
    nbformat.write(nb, path)
    return path


def test_make_assess_in_the_learner_edition_grades_a_solved_copy(tmp_path: Path) -> None:
    """``make assess``'s command in a fresh learner edition (the target runs set-up first, which a test must not run
    on the course's venv; ``make -n`` shows the target runs this command), on the learner's copy answered right."""
    edition = tmp_path / "course"
    built = subprocess.run([sys.executable, str(ROOT / "tools" / "student.py"), "--out", str(edition)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    dry = subprocess.run(["make", "-n", "assess"], cwd=edition, capture_output=True, text=True, timeout=60)
    assert "-m course_lib.assessment.selfgrade --notebook assessment/ddp/assessment.ipynb" in dry.stdout
    _solved_learner_copy(edition)
    env = {**__import__("os").environ, "PYTHONPATH": str(edition)}
    done = subprocess.run([sys.executable, "-m", "course_lib.assessment.selfgrade", "--notebook",
                           "assessment/ddp/assessment.ipynb"], cwd=edition, env=env, capture_output=True, text=True,
                          timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "UNPROCTORED" in out and "score: 80 / 80 autograded points (pass mark 56): PASS" in out, out[-4000:]
    assert "parts missed: none" in out and "written_answer (20 points): NOT SCORED" in out
    assert "self-issued" in out and '"machine": "machine: ' in out and '"notebook_sha256": "' in out
