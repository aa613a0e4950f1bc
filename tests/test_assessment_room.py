"""The room's grading cycle, scripted (issue 55, item 5): classroom/README.md's command blocks run in order against
a scratch course, with two learner accounts that fetch, answer (one right, one partly wrong) and submit through
nbgrader's exchange in between.

The scratch assignment is small (two questions, plain Python: 3 + 2 points) so the cycle is nbgrader's, not the
course's training; the points each learner gets are written below before anything runs. It checks the exchange,
autograde's points, the feedback, the CSV, that the gradebook and the CSV are 0600, and that the README's
deletion block leaves nothing. nbgrader comes from the course venv (``make room`` installs it:
requirements/assessment.txt) or ``$COURSE_NBGRADER``. Root only (two Unix users); they are removed at the end.
"""

from __future__ import annotations

import csv
import os
import pwd
import re
import shutil
import stat
import subprocess
from pathlib import Path

import nbformat
import pytest

from tests import traversal

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("COURSE_VENV", ROOT / ".venv"))
LEARNERS = {"ana": {"q1": "6", "q2": "'gloo'"}, "ben": {"q1": "6", "q2": "'mpi'"}}
EXPECTED = {"ana": 5.0, "ben": 3.0}  # q1 3 points, q2 2 points: ana right twice, ben wrong on q2

pytestmark = [pytest.mark.slow]


def _nbgrader() -> Path:
    found = Path(os.environ.get("COURSE_NBGRADER", VENV / "bin" / "nbgrader"))
    if not found.exists():
        pytest.fail(f"nbgrader is not at {found}: `make room` installs it (requirements/assessment.txt), or point "
                    "COURSE_NBGRADER at one", pytrace=False)
    return found


def _cell(source: str, grade_id: str, **kind) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "schema_version": 3, "grade": False, "solution": False,
                                 "locked": False, "task": False, **kind}
    return cell


def _assignment(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        _cell("### BEGIN SOLUTION\nQ1 = 6\n### END SOLUTION", "answer_q1", solution=True),
        _cell("### BEGIN HIDDEN TESTS\nassert Q1 == 2 * 3\n### END HIDDEN TESTS", "test_q1", grade=True,
              locked=True, points=3),
        _cell("### BEGIN SOLUTION\nQ2 = 'gloo'\n### END SOLUTION", "answer_q2", solution=True),
        _cell("### BEGIN HIDDEN TESTS\nassert Q2 == 'gloo'\n### END HIDDEN TESTS", "test_q2", grade=True,
              locked=True, points=2)]
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)


def _blocks() -> list[str]:
    text = (ROOT / "classroom" / "README.md").read_text().split("## Assessment (nbgrader)", 1)[1]
    return re.findall(r"```bash\n(.*?)```", text, re.S)


@pytest.fixture
def learners():
    if os.geteuid() != 0:
        pytest.fail("tests/test_assessment_room.py must run as root (it creates two learner accounts): run "
                    "`sudo make test`, or deselect it on purpose", pytrace=False)
    names = {name: f"c55{name}{os.getpid() % 1000}" for name in LEARNERS}
    for user in names.values():
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
    yield names
    for user in names.values():
        subprocess.run(["pkill", "-KILL", "-u", user], check=False)
        subprocess.run(["userdel", "--remove", user], check=False, capture_output=True)


def test_the_readme_cycle_with_two_learners(learners: dict[str, str], tmp_path: Path) -> None:
    nbgrader = _nbgrader()
    course = tmp_path / "course"
    (course / "assessment").mkdir(parents=True)
    shutil.copy(ROOT / "assessment" / "nbgrader_config.py", course / "assessment" / "nbgrader_config.py")
    _assignment(course / "assessment" / "source" / "ddp" / "assessment.ipynb")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o1777)
    tmp_path.chmod(0o755)
    env = {**os.environ, "COURSE_ROOM_EXCHANGE": str(exchange)}
    blocks = [b.replace("$PWD/../.venv/bin", str(nbgrader.parent)) for b in _blocks()]
    assert len(blocks) >= 4 and "generate_assignment" in blocks[0] and "autograde" in blocks[1]

    def run_block(index: int) -> None:
        done = subprocess.run(["bash", "-ec", blocks[index]], cwd=course, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"block {index}:\n{blocks[index]}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"

    python = Path(os.path.realpath(Path(nbgrader.read_text().splitlines()[0][2:].strip())))  # its shebang
    opened = traversal.open_for_traversal([nbgrader, python, exchange / "dl-course"])
    try:
        run_block(0)  # the gradebook, generate, release
        assert stat.S_IMODE(os.stat(course / "assessment" / "gradebook.db").st_mode) == 0o600
        for name, user in learners.items():  # each learner: fetch, answer, submit (as that Unix user)
            home = Path(pwd.getpwnam(user).pw_dir)
            learner_env = {"HOME": str(home), "PATH": os.environ["PATH"], "COURSE_ROOM_EXCHANGE": str(exchange),
                           "JUPYTER_CONFIG_PATH": str(ROOT / "classroom" / "nbgrader-learner")}
            as_learner = ["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in learner_env.items()]]
            fetched = subprocess.run([*as_learner, str(nbgrader), "fetch_assignment", "ddp"], cwd=home,
                                     capture_output=True, text=True, timeout=120)
            assert fetched.returncode == 0, fetched.stderr[-2000:]
            path = home / "ddp" / "assessment.ipynb"
            nb = nbformat.read(path, as_version=4)
            assert "assert" not in "\n".join(c.source for c in nb.cells)  # hidden tests are hidden
            nb.cells[0].source = f"Q1 = {LEARNERS[name]['q1']}"
            nb.cells[2].source = f"Q2 = {LEARNERS[name]['q2']}"
            nbformat.write(nb, path)
            shutil.chown(path, user)
            submitted = subprocess.run([*as_learner, str(nbgrader), "submit", "ddp"], cwd=home, capture_output=True,
                                       text=True, timeout=120)
            assert submitted.returncode == 0, submitted.stderr[-2000:]
        run_block(1)  # collect, autograde
        run_block(2)  # feedback, export
    finally:
        traversal.restore(opened)
    assessment = course / "assessment"
    with open(assessment / "grades.csv") as handle:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}
    assert scores == {learners[name]: points for name, points in EXPECTED.items()}
    for user in learners.values():
        assert (assessment / "feedback" / user / "ddp" / "assessment.html").is_file()
    for private in ("gradebook.db", "grades.csv"):
        assert stat.S_IMODE(os.stat(assessment / private).st_mode) == 0o600, private
    run_block(3)  # delete the grades
    left = [p.name for p in assessment.iterdir()]
    assert sorted(left) == ["nbgrader_config.py", "source"]
    assert not (exchange / "dl-course").exists()
