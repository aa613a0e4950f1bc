"""tests/conftest.py under pytest-xdist (issue 31, ``make test WORKERS=2``): each worker takes slot files of its own.

A scratch folder gets a copy of tests/conftest.py and two probe files; one real ``pytest -n 2 --dist loadfile`` run
shows that each worker's test modules, when imported (a module such as tests/test_scripts.py copies ``os.environ``
then), already see a slot folder of that worker's own, and that the folders are gone when the session ends.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from nested_pytest import PYTEST_WITHOUT_NBVAL

ROOT = Path(__file__).resolve().parents[1]

PROBE = '''
import json, os, pathlib

SEEN = os.environ.get("COURSE_SLOTS_DIR")   # at import, as a module that copies os.environ sees it


def test_probe():
    out = pathlib.Path(os.environ["PROBE_OUT"]) / (os.environ["PYTEST_XDIST_WORKER"] + "-" + __name__)
    out.write_text(json.dumps({"at_import": SEEN, "now": os.environ.get("COURSE_SLOTS_DIR")}))
'''


@pytest.mark.slow  # > 2 s: two workers start
def test_each_worker_has_its_own_slot_folder_from_the_start(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(ROOT / "tests" / "leftovers.py", tmp_path / "leftovers.py")  # the conftest imports it
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name in ("test_probe_a.py", "test_probe_b.py"):
        (tmp_path / name).write_text(PROBE)
    seen = tmp_path / "seen"
    seen.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "PROBE_OUT": str(seen), "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([*PYTEST_WITHOUT_NBVAL, "-n", "2", "--dist", "loadfile",
                           "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    records = {path.name: json.loads(path.read_text()) for path in seen.iterdir()}
    assert sorted(name.split("-")[0] for name in records) == ["gw0", "gw1"], records   # one file per worker
    folders = {record["at_import"] for record in records.values()}
    assert len(folders) == 2 and all(record["now"] == record["at_import"] for record in records.values()), records
    for folder in folders:
        assert Path(folder).parent == Path(tempfile.gettempdir()) and Path(folder).name.startswith("course-slots-gw")
        assert not Path(folder).exists(), f"{folder} was left behind"


class _LoadfileConfig:
    """The two options xdist's file scheduling reads: ``--dist loadfile`` on two workers."""

    def getoption(self, name: str, default: object = None) -> object:
        return {"dist": "loadfile", "numprocesses": 2, "tx": ["2*popen"]}.get(name, default)

    getvalue = getoption


def test_the_scheduler_keeps_units_that_share_a_worker_together() -> None:
    """tests/notebooks/harness.py's scheduler: all notebooks, test_ssh_hosts and the lab's browser test are one unit (one
    after another on one worker), test_tfds_cache goes with test_data (one ``fmnist_tfds`` preparation), any other
    file is its own."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebooks_conftest", ROOT / "tests" / "notebooks" / "harness.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scheduler = module.pytest_xdist_make_scheduler(_LoadfileConfig(), None)
    scope = scheduler._split_scope
    assert {scope("notebooks/01_data_parallelism.ipynb::Cell 3"), scope("notebooks/06_beyond_one_machine.ipynb::Cell 0"),
            scope("tests/test_ssh_hosts.py::test_x"), scope("tests/browser/test_lab.py::test_v")} == {"notebooks"}
    assert scope("tests/test_tfds_cache.py::test_y") == scope("tests/test_data.py::test_z") == "tests/test_data.py"
    assert scope("tests/test_launch.py::test_w") == "tests/test_launch.py"
