"""Tests of course_lib.runner.multiworker / supervise / faults.

Bad input must fail before anything starts; the supervisor is tried with tiny python workers, and
after each run no process of it may be left (by the recorded pids and by an environment marker).

The real runs are not repeated here: notebooks/06_beyond_one_machine.ipynb makes them, and nbval
compares each of its verdict lines (issue 31: the suite makes each launch once).

- Two host names (Gloo) and ``mpirun`` train to identical weights: 06's cells "two_hosts" and
  "with_mpirun" (both commands printed, ``-bind-to none`` included; "identical weights on every rank
  of both runs: True"), and both learn ("both learned (test accuracy >= 0.5 ...): True").
- An elastic job loses a worker, shrinks, grows back and finishes: 06's "elastic" cells (group sizes
  [2, 1, 2], the rates at 2 and 1 workers and their ratio, the final epoch, exit status 0).
- A killed MultiWorkerMirroredStrategy run resumes from its backup: 06's "killed" and "resumed" cells
  (killed, failed, stopped early; continued after the last finished epoch, ran exactly the missing
  epochs, "same final weights as the uninterrupted run: True"; the uninterrupted run learned).
- No process of any of those runs is left: 06's "processes of this notebook's runs still alive: 0",
  and tests/conftest.py's session-wide leftover check.
"""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from course_lib.runner import multiworker as mw
from course_lib.runner.faults import WorkerKiller
from course_lib.runner.launch import RunFailedError
from course_lib.runner.preflight import LaunchError

ROOT = Path(__file__).resolve().parents[1]
MWMS = ROOT / "source_code" / "mwms_fmnist.py"


def leftovers(mark: str, pids: list[int]) -> list[int]:
    """Live processes carrying ``COURSE_TEST_MARK=mark`` or listed in ``pids``."""
    found = set()
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.pid in pids or proc.environ().get("COURSE_TEST_MARK") == mark:
                found.add(proc.pid)
        except psutil.Error:
            continue
    return sorted(found)


@pytest.fixture
def mark():
    return uuid.uuid4().hex


# -- bad input, nothing launched -----------------------------------------------------------------
def test_worker_range_checks():
    mw.check_worker_range(2, 1, 2, slots=2)
    with pytest.raises(LaunchError, match="min_workers <= num_workers <= max_workers"):
        mw.check_worker_range(2, 3, 4)
    with pytest.raises(LaunchError, match="exceeds the 2 slots"):
        mw.check_worker_range(2, 1, 3, slots=2)
    with pytest.raises(LaunchError, match="int >= 1"):
        mw.check_worker_range(2, 0, 2)


def test_ports_in_use_or_repeated_are_refused():
    with socket.socket() as busy:
        busy.bind(("localhost", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {port} on localhost is in use"):
            mw.check_ports([port])
        with pytest.raises(LaunchError, match=f"port {port} on localhost is in use"):
            mw.run_multiworker(MWMS, ports=[port, port + 1])
    free = mw.free_ports(2)
    assert len(set(free)) == 2 and mw.check_ports(free) == free
    with pytest.raises(LaunchError, match="appears twice"):
        mw.check_ports([free[0], free[0]])
    with pytest.raises(LaunchError, match="1024..65535"):
        mw.check_ports([80])


def test_tf_config_names_the_cluster_and_the_task():
    import json

    config = json.loads(mw.tf_config([5001, 5002], 1))
    assert config == {"cluster": {"worker": ["localhost:5001", "localhost:5002"]},
                      "task": {"type": "worker", "index": 1}}


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout": None}, "wait forever"),
    ({"worker_envs": []}, "non-empty list"),
    ({"worker_envs": [{"A": 1}]}, r"worker_envs\[0\] values\[0\] = 1 is a int"),
])
def test_run_workers_bad_input(kwargs, message):
    args = {"worker_envs": [{}], "timeout": 10, **kwargs}
    with pytest.raises(LaunchError, match=message):
        mw.run_workers(MWMS, **args)


@pytest.mark.parametrize("kwargs, message", [
    ({"min_workers": 3}, "min_workers <= num_workers"),
    ({"hosts": "localhost"}, "malformed"),
    ({"hosts": "localhost:1", "max_workers": 2}, "exceeds the 1 slots"),
    ({"cooldown_range": (5, 2)}, "low <= high"),
    ({"discovery_script": ROOT / "cluster" / "hostfile.local"}, "not an executable file"),
])
def test_run_elastic_bad_input(kwargs, message):
    with pytest.raises(LaunchError, match=message):
        mw.run_elastic(ROOT / "source_code" / "horovod_fmnist_elastic.py", elastic=mw.Elastic(**kwargs))


def test_elastic_command_is_complete():
    elastic = mw.Elastic(min_workers=1, max_workers=2, discovery_script=Path("/d.sh"),
                         network_interface="lo", cooldown_range=(1, 2), elastic_timeout=60)
    command = mw.build_elastic_command("horovodrun", 2, ["python", "t.py", "--x"], elastic)
    assert command == ["horovodrun", "-np", "2", "--min-np", "1", "--max-np", "2",
                       "--host-discovery-script", "/d.sh", "--elastic-timeout", "60",
                       "--network-interface", "lo", "--blacklist-cooldown-range", "1", "2",
                       "python", "t.py", "--x"]


# -- the supervisor with tiny workers (no TensorFlow) --------------------------------------------
def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "worker.py"
    path.write_text(text)
    return path


def test_run_workers_tags_lines_and_gives_each_worker_its_env(tmp_path, mark):
    script = _script(tmp_path, "import json, os\nprint(json.dumps({'event': 'digest', 'rank': "
                               "int(os.environ['IDX']), 'digest': os.environ['IDX'] * 3}))\n")
    result = mw.run_workers(script, workers=2, worker_envs=[{"IDX": "0"}, {"IDX": "1"}], timeout=60,
                            env={"COURSE_TEST_MARK": mark}, show="none")
    assert result.returncode == 0
    assert result.digests == {0: "000", 1: "111"}
    assert leftovers(mark, result.pids) == []


def test_one_failed_worker_ends_the_others(tmp_path, mark):
    script = _script(tmp_path, "import os, sys, time\nif os.environ['IDX'] == '1':\n"
                               "    sys.exit(3)\ntime.sleep(600)\n")
    with pytest.raises(RunFailedError, match="the group of 2 workers exited with status 3") as err:
        mw.run_workers(script, workers=2, worker_envs=[{"IDX": "0"}, {"IDX": "1"}], timeout=60,
                       env={"COURSE_TEST_MARK": mark}, show="none")
    assert err.value.result.duration_s < 30  # not the 600 s sleep, not the timeout
    assert leftovers(mark, err.value.result.pids) == []


def test_worker_killer_kills_the_named_rank_once(tmp_path):
    import subprocess
    import time

    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        killer = WorkerKiller(rank=1, after_epoch=2, fraction=0.0)
        killer({"event": "worker", "rank": 1, "pid": victim.pid})
        killer({"event": "epoch", "epoch": 1, "epoch_time_s": 1.0})
        time.sleep(0.3)
        assert victim.poll() is None  # not yet: wrong epoch
        killer({"event": "epoch", "epoch": 2, "epoch_time_s": 1.0})
        assert victim.wait(timeout=10) == -9
        assert killer.killed_pid == victim.pid
    finally:
        victim.kill()
        victim.wait()
    with pytest.raises(ValueError):
        WorkerKiller(fraction=1.5)
