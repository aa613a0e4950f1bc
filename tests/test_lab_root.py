"""`make lab` serves the course root: scripts and library visible; solutions hidden and refused (issue 13)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from course_lib.environment.lab import COURSE_DIR, lab_command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_lab_command_serves_the_course_root_and_hides_instructor() -> None:
    command = lab_command(port=8999)
    assert f"--notebook-dir={COURSE_DIR}" in command
    assert any(arg.startswith("--ContentsManager.hide_globs=") and "'instructor'" in arg for arg in command)
    assert "--LabApp.default_url=/lab/tree/notebooks/00_setup.ipynb" in command
    assert (COURSE_DIR / "instructor" / "solutions" / "answers.py").is_file()
    assert not (COURSE_DIR / "notebooks" / "solutions").exists(), "solutions must not sit next to the notebooks"


@dataclass
class RunningLab:
    """A lab started with :func:`lab_command` on a scratch course (``root``), answering on ``port``."""

    root: Path
    port: int
    token: str
    log: Path


@pytest.fixture(scope="module")
def running_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    """ONE lab for the two tests below (a lab start costs ~5 CPU-s): ``make lab``'s command on a scratch copy of
    the course's layout (the tests write into it; never into the checkout). That the command serves the course
    root by default is :func:`test_lab_command_serves_the_course_root_and_hides_instructor`'s check."""
    tmp_path = tmp_path_factory.mktemp("lab-root")
    course = _scratch_course(tmp_path / "course")
    port, token = _free_port(), secrets.token_hex(8)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "IPYTHONDIR": str(tmp_path / "ipython")}
    log_path = tmp_path / "lab.log"
    log = log_path.open("w")
    proc = subprocess.Popen(lab_command(port=port, token=token, notebook_dir=course), env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if _request(port, token, "GET", "/api/status")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        yield RunningLab(course, port, token, log_path)
    finally:
        _stop_lab(proc, log)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_the_running_lab_lists_code_but_not_solutions(running_lab: RunningLab) -> None:
    status, body = _request(running_lab.port, running_lab.token, "GET", "/api/contents")
    assert status == 200, running_lab.log.read_text()
    names = {item["name"] for item in json.loads(body)["content"]}
    assert {"notebooks", "source_code", "course_lib"} <= names
    assert "instructor" not in names and (running_lab.root / "instructor").is_dir()


# --- the lab refuses the instructors' folder, whatever the URL (issue 13; issue 18 "not readable") ----------
def test_first_folder_normalises_the_path() -> None:
    from course_lib.environment.course_contents import first_folder

    assert first_folder("instructor/solutions/answers.py") == "instructor"
    assert first_folder("/Instructor/x") == "instructor"
    assert first_folder("notebooks/../instructor/solutions") == "instructor"
    assert first_folder("./instructor") == "instructor"
    assert first_folder("notebooks/instructor/x") == "notebooks"
    assert first_folder("") == "" and first_folder("..") == ""


def test_the_manager_refuses_links_and_spellings_of_the_folder(tmp_path: Path) -> None:
    from course_lib.environment.course_contents import CourseContentsManager

    (tmp_path / "instructor" / "solutions").mkdir(parents=True)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "answers_link").symlink_to(tmp_path / "instructor" / "solutions")
    manager = CourseContentsManager(root_dir=str(tmp_path))
    for path in ("instructor", "instructor/solutions/answers.py", "INSTRUCTOR/solutions",
                 "notebooks/../instructor/solutions/answers.py", "notebooks/answers_link/answers.py"):
        assert manager.refuses(path), path
    for path in ("", "notebooks", "notebooks/00_setup.ipynb", "instructors_guide.md"):
        assert not manager.refuses(path), path


def _scratch_course(root: Path) -> Path:
    """A small course tree to serve: the lab may try to write there, never in the real checkout."""
    for relative in ("notebooks/00_setup.ipynb", "instructor/solutions/answers.py", "source_code/keras_fmnist.py",
                     "course_lib/__init__.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes((COURSE_DIR / relative).read_bytes())
    return root


def _request(port: int, token: str, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_the_running_lab_refuses_typed_urls_to_the_solutions(running_lab: RunningLab) -> None:
    course, port, token = running_lab.root, running_lab.port, running_lab.token
    answers = course / "instructor" / "solutions" / "answers.py"
    secret = answers.read_text().splitlines()[0].encode()
    # Controls: the lab serves and changes what a learner may see and change.
    status, body = _request(port, token, "GET", "/api/contents/notebooks/00_setup.ipynb")
    assert status == 200 and json.loads(body)["type"] == "notebook", running_lab.log.read_text()
    assert _request(port, token, "GET", "/files/source_code/keras_fmnist.py")[0] == 200
    assert _request(port, token, "PUT", "/api/contents/notebooks/scratch.txt",
                    {"type": "file", "format": "text", "content": "x"})[0] == 201
    # Every way in to the solutions answers 404 and shows none of their text.
    refused = [("GET", "/api/contents/instructor/solutions/answers.py", None),
               ("GET", "/files/instructor/solutions/answers.py", None),
               ("GET", "/files/instructor/solutions/answers.py?download=1", None),
               ("GET", "/view/instructor/solutions/answers.py", None),
               ("GET", "/api/contents/instructor", None),
               ("GET", "/api/contents/instructor/solutions", None),
               ("GET", "/api/contents/notebooks/..%2Finstructor/solutions/answers.py", None),
               ("GET", "/api/contents/instructor/solutions/answers.py/checkpoints", None),
               ("POST", "/api/contents/notebooks", {"copy_from": "instructor/solutions/answers.py"}),
               ("PATCH", "/api/contents/notebooks/scratch.txt", {"path": "instructor/scratch.txt"}),
               ("PUT", "/api/contents/instructor/new.py", {"type": "file", "format": "text", "content": "x"}),
               ("DELETE", "/api/contents/instructor/solutions/answers.py", None)]
    for method, path, body in refused:
        status, content = _request(port, token, method, path, body)
        # Reads answer 404 (nothing there); Jupyter's handlers answer 400 to a change of a hidden path.
        assert status == 404 or (method != "GET" and status == 400), f"{method} {path} answered {status}"
        assert secret not in content, f"{method} {path} showed the solutions"
    status, page = _request(port, token, "GET", "/lab/tree/instructor/solutions/answers.py")
    assert secret not in page  # the lab's page is served, but the file it asks for is refused above
    assert answers.is_file() and not (course / "instructor" / "new.py").exists()
    assert not (course / "instructor" / "scratch.txt").exists()
    assert sorted(p.name for p in (course / "notebooks").iterdir() if not p.name.startswith(".")) == [
        "00_setup.ipynb", "scratch.txt"]


def _stop_lab(proc: subprocess.Popen, log) -> None:
    """End a lab the test started (SIGTERM, then SIGKILL after 20 s) and close its log."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    assert proc.poll() is not None, "the lab outlived the test"
