"""`make lab` serves the course root: scripts and library visible, solutions hidden (issue 13, defect 8)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

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


def test_the_running_lab_lists_code_but_not_solutions(tmp_path: Path) -> None:
    port, token = _free_port(), "course-lab-root"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "IPYTHONDIR": str(tmp_path / "ipython")}
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(lab_command(port=port, token=token), env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        listing = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and listing is None:
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{port}/api/contents",
                                                 headers={"Authorization": f"token {token}"})
                with urllib.request.urlopen(request, timeout=5) as response:
                    listing = json.loads(response.read())
            except OSError:
                time.sleep(1)
        assert listing is not None, (tmp_path / "lab.log").read_text()
        names = {item["name"] for item in listing["content"]}
        assert {"notebooks", "source_code", "course_lib"} <= names
        assert "instructor" not in names
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.poll() is not None, "the lab outlived the test"
