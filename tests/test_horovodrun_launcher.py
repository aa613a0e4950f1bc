"""Tests of course_lib.runner.horovodrun: horovodrun with its build check answered from a kept file.

The unit tests drive :func:`keep_answers` with a stand-in for ``horovod.runner.launch`` that counts the
questions it is asked. The real launches prove that the file is what answers (a kept "not built" makes
the launch fail as Horovod's own check would) and that a key of another install asks Horovod again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import SimpleNamespace

import pytest

from course_lib.runner import horovodrun as hr
from course_lib.runner import launch

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def stand_in(answers: dict[str, bool | None]) -> SimpleNamespace:
    """A module with horovod's build questions that records every time Horovod is asked."""
    asked: list[tuple[str, bool]] = []

    def question(name: str):
        def ask(verbose: bool = False):
            asked.append((name, verbose))
            return answers[name]
        return ask

    return SimpleNamespace(asked=asked, **{name: question(name) for name in hr.CHECKS})


def fake_horovod(tmp_path: Path, frameworks=("tensorflow",)) -> Path:
    root = tmp_path / "horovod"
    for framework in frameworks:
        (root / framework).mkdir(parents=True)
        (root / framework / f"mpi_lib{SUFFIX}").write_bytes(b"\0" * 10)
    return root


def test_the_key_follows_the_installed_extension(tmp_path):
    root = fake_horovod(tmp_path)
    key = hr.extension_key(root, "/v/python")
    assert key == hr.extension_key(root, "/v/python")
    assert key != hr.extension_key(root, "/other/python")
    library = root / "tensorflow" / f"mpi_lib{SUFFIX}"
    stat = library.stat()
    os.utime(library, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))   # reinstalled: new mtime
    assert hr.extension_key(root, "/v/python") != key
    (root / "torch").mkdir()
    (root / "torch" / f"mpi_lib{SUFFIX}").write_bytes(b"\0")                 # a second framework built
    assert hr.extension_key(root, "/v/python") not in (key, None)
    assert hr.extension_key(tmp_path / "nothing", "/v/python") is None       # no extension: no key


def test_an_answer_is_asked_once_then_read_from_the_file(tmp_path):
    module = stand_in({"mpi_built": True, "gloo_built": True, "nccl_built": False, "ddl_built": False,
                       "ccl_built": None})
    path = tmp_path / "cache" / hr.FILE_NAME
    hr.keep_answers(module, "k1", path)
    assert module.gloo_built() is True and module.gloo_built() is True
    assert module.mpi_built(verbose=False) is True and module.ccl_built() is None
    assert module.asked == [("gloo_built", False), ("mpi_built", False), ("ccl_built", False)]
    assert json.loads(path.read_text()) == {"k1": {"gloo_built": True, "mpi_built": True, "ccl_built": None}}
    module.gloo_built(verbose=True)                                   # --verbose: Horovod's own, printed check
    assert module.asked[-1] == ("gloo_built", True)

    again = stand_in({"gloo_built": False} | {n: True for n in hr.CHECKS if n != "gloo_built"})
    hr.keep_answers(again, "k1", path)                                # a new process, same install
    assert again.gloo_built() is True and again.asked == []           # the file answered, not Horovod
    other = stand_in({n: False for n in hr.CHECKS})
    hr.keep_answers(other, "k2", path)                                # another install: asked afresh
    assert other.gloo_built() is False and other.asked == [("gloo_built", False)]
    assert set(json.loads(path.read_text())) == {"k1", "k2"}          # both installs kept


def test_only_the_newest_installs_are_kept(tmp_path):
    path = tmp_path / hr.FILE_NAME
    for index in range(hr._KEEP + 3):
        module = stand_in({n: True for n in hr.CHECKS})
        hr.keep_answers(module, f"k{index}", path)
        module.mpi_built()
    kept = list(json.loads(path.read_text()))
    assert kept == [f"k{index}" for index in range(3, hr._KEEP + 3)]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_a_damaged_file_only_costs_the_check(tmp_path, content):
    path = tmp_path / hr.FILE_NAME
    path.write_text(content)
    module = stand_in({n: True for n in hr.CHECKS})
    hr.keep_answers(module, "k", path)
    assert module.gloo_built() is True and module.asked == [("gloo_built", False)]
    assert json.loads(path.read_text()) == {"k": {"gloo_built": True}}


def test_an_unwritable_folder_only_costs_the_check(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    module = stand_in({n: True for n in hr.CHECKS})
    hr.keep_answers(module, "k", blocker / "sub" / hr.FILE_NAME)
    assert module.gloo_built() is True and module.gloo_built() is True
    assert module.asked == [("gloo_built", False)] * 2
    assert list(tmp_path.iterdir()) == [blocker]                      # nothing half-written left


def test_where_the_file_is():
    assert hr.cache_file({"COURSE_BUILD_CACHE": "/c"}) == Path("/c") / hr.FILE_NAME
    assert hr.cache_file({"XDG_CACHE_HOME": "/x"}) == Path("/x/course-dl") / hr.FILE_NAME
    assert hr.cache_file({}) == Path.home() / ".cache" / "course-dl" / hr.FILE_NAME


def test_the_course_starts_horovod_runs_through_it(monkeypatch):
    monkeypatch.setattr(launch, "find_horovodrun", lambda python: "/v/horovodrun")
    assert launch.horovod_launcher("/v/python", "/v/horovodrun") == ["/v/python", "-m", "course_lib.runner.horovodrun"]
    with pytest.raises(launch.LaunchError, match="make setup"):
        launch.horovod_launcher("/v/python", "")
    command = launch.build_horovod_command(["/v/python", "-m", "m"], 2, ["/v/python", "s.py"], None, "gloo", [])
    assert command == ["/v/python", "-m", "m", "-np", "2", "--gloo", "/v/python", "s.py"]


# -- real launches ---------------------------------------------------------------------------------
def _launch(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COURSE_BUILD_CACHE": str(cache), "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "course_lib.runner.horovodrun", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)


def _key() -> str:
    import horovod
    key = hr.extension_key(Path(horovod.__file__).parent)
    assert key is not None, "Horovod's TensorFlow extension is not installed"
    return key


@pytest.mark.requires("horovodrun")
@pytest.mark.horovod
def test_a_real_launch_reads_its_answer_from_the_file(tmp_path):
    """A kept "Gloo not built" fails the launch as Horovod's check would; a fresh file asks Horovod."""
    program = ["--gloo", "-np", "1", "-H", "localhost:1", sys.executable, "-c", "print('rank ran')"]
    (tmp_path / hr.FILE_NAME).write_text(json.dumps({_key(): {"gloo_built": False}}))
    refused = _launch(tmp_path, *program)
    assert refused.returncode != 0 and "Gloo support has not been built" in refused.stderr, refused.stderr[-2000:]
    assert "rank ran" not in refused.stdout

    (tmp_path / hr.FILE_NAME).write_text(json.dumps({"another-install": {"gloo_built": False}}))
    ran = _launch(tmp_path, *program)
    assert ran.returncode == 0 and "rank ran" in ran.stdout, ran.stderr[-2000:]
    kept = json.loads((tmp_path / hr.FILE_NAME).read_text())
    assert kept[_key()] == {"gloo_built": True} and "another-install" in kept


@pytest.mark.requires("horovodrun")
def test_it_takes_horovodruns_arguments():
    ours = _launch(Path("/nonexistent"), "--version")
    theirs = subprocess.run([launch.find_horovodrun(), "--version"], capture_output=True, text=True, timeout=60)
    assert ours.returncode == theirs.returncode == 0 and ours.stdout == theirs.stdout != ""


def test_answers_learned_elsewhere_are_kept_for_the_install(tmp_path):
    root = fake_horovod(tmp_path)
    path = tmp_path / hr.FILE_NAME
    assert hr.remember_answers({"mpi_built": True, "gloo_built": True}, root, path) is True
    module = stand_in({n: False for n in hr.CHECKS})
    hr.keep_answers(module, hr.extension_key(root), path)
    assert module.gloo_built() is True and module.mpi_built() is True and module.asked == []  # nothing asked
    assert hr.remember_answers({"gloo_built": True}, tmp_path / "nothing", path) is False     # no extension
    with pytest.raises(ValueError, match="True/False"):
        hr.remember_answers({"gloo_built": 1}, root, path)
    with pytest.raises(ValueError, match="mpi_built"):
        hr.remember_answers({"gloo": True}, root, path)


def test_setups_check_of_a_new_horovod_keeps_its_answers(tmp_path, monkeypatch):
    """tools/setup.sh's HVD_PROBE (run here in-process, the doctor's probe stubbed) keeps what it learned."""
    import re

    from course_lib.environment import doctor

    text = (ROOT / "tools" / "setup.sh").read_text()
    probe = re.search(r"^HVD_PROBE='(.*?)'$", text, re.S | re.M).group(1)
    monkeypatch.setenv("COURSE_BUILD_CACHE", str(tmp_path))
    monkeypatch.setattr(doctor, "horovod_build_info",
                        lambda: {"TensorFlow": True, "MPI": False, "Gloo": True, "NCCL": False})
    with pytest.raises(SystemExit) as ended:
        exec(compile(probe, "HVD_PROBE", "exec"), {})
    assert ended.value.code == 0
    import horovod

    kept = json.loads((tmp_path / hr.FILE_NAME).read_text())
    assert kept == {hr.extension_key(Path(horovod.__file__).parent): {"mpi_built": False, "gloo_built": True}}
