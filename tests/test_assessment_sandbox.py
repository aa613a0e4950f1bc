"""Hostile submissions against the grading sandbox (issue 55, items 4 and 5).

Each test runs one hostile notebook twice: contained (:class:`course_lib.assessment.sandbox.Sandbox`: a dedicated
user in fresh mount/PID/network namespaces, a cgroup's memory and process limits, a scrubbed environment) and, to
show that the test can fail, uncontained (the same notebook in a plain kernel of this user, as nbgrader runs a
submission out of the box): the attack succeeds uncontained and fails contained, with the grade cell after it still
graded and the files that must survive intact. Root only (namespaces, a user, cgroups); the users and every process
are removed at the end. Short limits: 64 processes, 512 MiB, 32 MiB per file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from course_lib.assessment.sandbox import Limits, Sandbox, remove_user

ROOT = Path(__file__).resolve().parents[1]
USER = f"course-grade-test{os.getpid() % 10000}"
LIMITS = Limits(memory_mb=512, processes=64, file_mb=32, tmp_mb=64)
TOKEN = "hub-token-that-must-not-leak"

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        pytest.fail("tests/test_assessment_sandbox.py must run as root (it creates a grading user, namespaces and "
                    "cgroups): run `sudo make test`, or deselect it on purpose", pytrace=False)
    course = tmp_path_factory.mktemp("course")
    (course / "source_code").mkdir()
    (course / "source_code" / "keep.py").write_text("print('the course')\n")
    for path in (course, course / "source_code", course / "source_code" / "keep.py"):
        path.chmod(0o777)  # writable by anyone: only the read-only mount keeps the course intact
    course.parent.chmod(0o755)
    secret = tmp_path_factory.mktemp("grader")
    (secret / "gradebook.db").write_text("gradebook")
    (secret / "submitted" / "ben").mkdir(parents=True)
    (secret / "submitted" / "ben" / "assessment.ipynb").write_text("ben's answers")
    (secret / "source").mkdir()
    (secret / "source" / "assessment.ipynb").write_text("the solutions")
    os.environ["JUPYTERHUB_API_TOKEN"] = TOKEN
    box = Sandbox(USER, readonly=[*Sandbox.default_readonly(), str(course)], limits=LIMITS)
    box.course, box.secret = course, secret
    yield box
    os.environ.pop("JUPYTERHUB_API_TOKEN", None)
    for proc in psutil.process_iter(["username"]):
        if proc.info["username"] == USER:
            proc.kill()
    remove_user(USER)


def _notebook(hostile: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(hostile), nbformat.v4.new_code_cell("print('graded after it')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _run(box: Sandbox, hostile: str, tmp_path: Path, contained: bool, timeout: float = 20) -> str:
    """Execute the hostile notebook; returns all its outputs as text."""
    work = tmp_path / ("contained" if contained else "plain")
    work.mkdir()
    nb = _notebook(hostile)
    if contained:
        nb = box.execute(nb, work, timeout=timeout, total_timeout=timeout * 3 + 30)
    else:
        from nbclient import NotebookClient

        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(work)}}).execute()
        except Exception as exc:  # a timeout stops the plain run
            nb.cells[-1].outputs = [{"output_type": "stream", "name": "stderr", "text": str(exc)}]
    return "\n".join(str(o.get("text", "")) + str(o.get("evalue", "")) + str(o.get("ename", ""))
                     for c in nb.cells for o in c.get("outputs", []))


def _sleepers(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def _end(procs: list[psutil.Process]) -> None:
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass


@pytest.mark.parametrize("contained", [True, False])
def test_reading_another_submission_the_sources_or_the_gradebook_fails(sandbox, tmp_path: Path,
                                                                        contained: bool) -> None:
    targets = [sandbox.secret / "gradebook.db", sandbox.secret / "submitted" / "ben" / "assessment.ipynb",
               sandbox.secret / "source" / "assessment.ipynb"]
    assert all(t.read_text() for t in targets)  # they exist, and the grader reads them
    code = "\n".join(f"try:\n    print('READ', open({str(t)!r}).read())\nexcept OSError as e:\n    print('FAILED', "
                     "type(e).__name__)" for t in targets)
    out = _run(sandbox, code, tmp_path, contained)
    if contained:
        assert out.count("FAILED FileNotFoundError") == 3 and "READ" not in out
        assert "graded after it" in out
    else:
        assert out.count("READ") == 3


@pytest.mark.parametrize("contained", [True, False])
def test_deleting_the_course_fails_and_the_course_stays(sandbox, tmp_path: Path, contained: bool) -> None:
    keep = sandbox.course / "source_code" / "keep.py"
    out = _run(sandbox, f"import shutil\ntry:\n    shutil.rmtree({str(keep.parent)!r}); print('DELETED')\n"
                        "except OSError as e:\n    print('FAILED', e)", tmp_path, contained)
    if contained:
        assert "Read-only file system" in out and keep.read_text() == "print('the course')\n"
    else:
        assert "DELETED" in out and not keep.exists()
        keep.parent.mkdir(mode=0o777)
        keep.write_text("print('the course')\n")
        keep.parent.chmod(0o777)
        keep.chmod(0o777)


@pytest.mark.parametrize("contained", [True, False])
def test_no_network_but_loopback_and_no_hub_token(sandbox, tmp_path: Path, contained: bool) -> None:
    code = ("import os, socket\nprint('TOKEN', os.environ.get('JUPYTERHUB_API_TOKEN'))\n"
            "print('IFACES', sorted(n for _, n in socket.if_nameindex()))\n"
            "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)\n"
            "cli = socket.create_connection(srv.getsockname(), timeout=2); print('LOOPBACK OK')")
    out = _run(sandbox, code, tmp_path, contained)
    assert "LOOPBACK OK" in out
    if contained:
        assert "TOKEN None" in out and "IFACES ['lo']" in out
    else:
        assert TOKEN in out and "IFACES ['lo']" not in out


@pytest.mark.parametrize("contained", [True, False])
def test_a_double_forked_setsid_process_is_ended(sandbox, tmp_path: Path, contained: bool) -> None:
    marker = f"sleep {600 + int(contained)}.5"
    _run(sandbox, f"import subprocess\nsubprocess.run(['setsid', 'sh', '-c', '{marker} &'])\nprint('started')",
         tmp_path, contained)
    time.sleep(0.5)
    left = _sleepers(marker)
    try:
        assert (not left) if contained else left
    finally:
        _end(left)


@pytest.mark.parametrize("contained", [True, False])
def test_processes_started_in_a_loop_stop_at_the_limit_and_end(sandbox, tmp_path: Path, contained: bool) -> None:
    marker = f"sleep {700 + int(contained)}.5"
    code = ("import subprocess\nstarted = 0\nfor _ in range(150):\n    try:\n"
            f"        subprocess.Popen({marker.split()!r}); started += 1\n"
            "    except OSError:\n        break\nprint('STARTED', started)")
    out = _run(sandbox, code, tmp_path, contained)
    left = _sleepers(marker)
    try:
        started = int(out.split("STARTED ")[1].split()[0])
        if contained:
            assert started < LIMITS.processes and not left
        else:  # no limit (the kernel's shutdown ends its children here; a setsid one survives: test above)
            assert started == 150
    finally:
        _end(left)


@pytest.mark.parametrize("contained", [True, False])
def test_an_endless_loop_is_stopped_and_graded_zero(sandbox, tmp_path: Path, contained: bool) -> None:
    start = time.monotonic()
    out = _run(sandbox, "while True:\n    pass", tmp_path, contained, timeout=5)
    assert "graded after it" not in out  # the grade cell after it gets nothing
    assert time.monotonic() - start < 60
    assert not [p for p in psutil.process_iter(["username"]) if p.info["username"] == USER]


@pytest.mark.parametrize("contained", [True, False])
def test_filling_the_disk_stops_at_the_file_limit(sandbox, tmp_path: Path, contained: bool) -> None:
    code = ("block = b'x' * (1 << 20)\nwritten = 0\ntry:\n    with open('big', 'wb') as f:\n"
            "        for _ in range(100):\n            f.write(block); f.flush(); written += 1\n"
            "except OSError as e:\n    print('FAILED', e)\nprint('WROTE MB', written)")
    out = _run(sandbox, code, tmp_path, contained)
    wrote = int(out.split("WROTE MB ")[1].split()[0])
    assert (wrote <= LIMITS.file_mb) if contained else wrote == 100


@pytest.mark.parametrize("contained", [True, False])
def test_filling_the_memory_kills_the_kernel_not_the_grader(sandbox, tmp_path: Path, contained: bool) -> None:
    out = _run(sandbox, "hog = bytearray(1536 << 20)\nhog[::4096] = b'x' * len(hog[::4096])\nprint('ALLOCATED')",
               tmp_path, contained)
    assert ("ALLOCATED" not in out) if contained else "ALLOCATED" in out


@pytest.mark.parametrize("contained", [True, False])
def test_megabytes_of_output_are_cut(sandbox, tmp_path: Path, contained: bool) -> None:
    out = _run(sandbox, "for _ in range(400):\n    print('y' * 50_000)", tmp_path, contained)
    assert (len(out) < 600_000 and "output cut" in out) if contained else len(out) > 10_000_000


@pytest.mark.horovod
@pytest.mark.requires("horovodrun")
@pytest.mark.parametrize("script, points", [("instructor/assessment/tape_fmnist_solution.py", 40),
                                            ("assessment/starter_tape_fmnist.py", 0)])
def test_the_code_task_graded_contained(sandbox, tmp_path: Path, script: str, points: int) -> None:
    """The grader's own launch, contained: horovodrun and both ranks as the grading user on the namespace's
    loopback, the grader as its first process; the solution gets every code point, the starter none."""
    import shutil

    box = Sandbox(USER, limits=Limits())  # a training run: the default limits (6 GiB, 256 processes)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / script, work / "tape_fmnist.py")
    grade = box.grade_code(work / "tape_fmnist.py", work, timeout=900)
    assert sum(p.points for p in grade.parts.values()) == points, grade.summary()
    assert not [p for p in psutil.process_iter(["username"]) if p.info["username"] == USER]


@pytest.mark.horovod
@pytest.mark.requires("horovodrun")
def test_the_assessment_graded_contained_end_to_end(sandbox, tmp_path: Path) -> None:
    """The instructor's contained grading of one submission (classroom/README.md, ``selfgrade --sandbox``): the
    whole solved notebook runs in the sandbox (its code launch and the measure task's 4 launches on the namespace's
    loopback), then the grader checks the answers outside the kernel and re-launches the code task contained."""
    from course_lib.assessment import selfgrade
    from course_lib.assessment.release import graded_copy
    from test_assessment_launch import _solved_learner_copy

    edition = tmp_path / "course"
    (edition / "assessment" / "ddp").mkdir(parents=True)
    source = nbformat.read(ROOT / "assessment" / "source" / "ddp" / "assessment.ipynb", as_version=4)
    from course_lib.assessment.release import release

    nbformat.write(release(source), edition / "assessment" / "ddp" / "assessment.ipynb")
    nbformat.write(graded_copy(source), tmp_path / "tests.ipynb")
    notebook = _solved_learner_copy(edition)
    result = selfgrade.grade(notebook, tmp_path / "tests.ipynb", timeout=900,
                             sandbox=Sandbox(USER, limits=Limits()))
    assert result.score == 80, {k: v.reason for k, v in result.cells.items() if v.reason}
    assert not [p for p in psutil.process_iter(["username"]) if p.info["username"] == USER]


def test_a_hostile_submission_is_graded_zero_with_a_reason_and_harms_nothing(sandbox, tmp_path: Path) -> None:
    """One submission that tries everything at once, graded contained the way the room grades: it silences its own
    test, reads another learner's submission, deletes the course and writes over the gradebook, and answers wrong.
    Its part gets 0 with the reason the grader's own check gives; the gradebook, the other submission and the
    course are intact."""
    from course_lib.assessment import selfgrade
    from test_assessment_selfgrade import _concept_tests_nb

    gradebook, other = sandbox.secret / "gradebook.db", sandbox.secret / "submitted" / "ben" / "assessment.ipynb"
    keep = sandbox.course / "source_code" / "keep.py"
    attacks = [f"print(open({str(other)!r}).read())", f"import shutil; shutil.rmtree({str(keep.parent)!r})",
               f"open({str(gradebook)!r}, 'w').write('all full marks')"]
    hostile = "\n".join(["ANSWER_EPOCHS = 3",
                         "get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)"]
                        + [f"try:\n    {attack}\nexcept OSError as e:\n    print('BLOCKED', type(e).__name__)"
                           for attack in attacks])
    learner = _concept_tests_nb()
    learner.cells[0].source = hostile
    (tmp_path / "me").mkdir()
    nbformat.write(learner, tmp_path / "me" / "nb.ipynb")
    nbformat.write(_concept_tests_nb(), tmp_path / "tests.ipynb")
    executed = []
    real_execute = sandbox.execute
    sandbox.execute = lambda *a, **k: executed.append(real_execute(*a, **k)) or executed[-1]
    try:
        result = selfgrade.grade(tmp_path / "me" / "nb.ipynb", tmp_path / "tests.ipynb", timeout=60,
                                 sandbox=sandbox)
    finally:
        del sandbox.execute
    printed = "".join(str(o.get("text", "")) for o in executed[0].cells[0].outputs)
    assert printed.count("BLOCKED") == 3, printed  # every attack was tried, and each failed
    assert result.cells["concept_epochs"].points == 0
    assert "dividing epochs" in result.cells["concept_epochs"].reason
    assert gradebook.read_text() == "gradebook" and other.read_text() == "ben's answers"
    assert keep.read_text() == "print('the course')\n"


def test_a_grading_user_is_never_root() -> None:
    """course_lib.assessment.confine refuses root as the dedicated grading user (it exists: nothing is created)."""
    from course_lib.assessment import confine

    with pytest.raises(ValueError, match="unprivileged"):
        confine.ensure_user("root")
    assert confine.Limits().memory_mb > 0 and confine.Limits().processes > 0
