"""Placement with real launches: each rank runs on the cores it was granted, read from /proc.

``tests/scripts/where_hvd.py`` (no TensorFlow) prints its rank's ``Cpus_allowed_list`` from
``/proc/self/status`` while every peer of the test is alive (a barrier folder), so the sets compared
below belong to processes that ran at the same time. Every test uses a slot folder of its own and the
machine's real cores (at least 2: the course's CI machine has exactly 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from course_lib.runner import launch, multiworker, slots
from course_lib.runner.launch import SlotsBusyError
from course_lib.training.machine.capacity import machine_capacity
from course_lib.training.machine.placement import parse_cores

ROOT = Path(__file__).resolve().parents[1]
WHERE = ROOT / "tests" / "scripts" / "where_hvd.py"
needs_horovod = pytest.mark.requires("horovodrun")


@pytest.fixture(autouse=True)
def private_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.delenv("COURSE_SLOTS", raising=False)
    if len(machine_capacity("cpu").ids) < 2:
        pytest.fail("the placement tests need 2 CPU cores (this process may use "
                    f"{machine_capacity('cpu').ids}); run them on a machine with 2 or more")


def wheres(result) -> list[dict]:
    return sorted((e for _, e in result.events if e.get("event") == "where"), key=lambda e: e["rank"])


@needs_horovod
@pytest.mark.horovod
def test_two_concurrent_one_worker_runs_land_on_disjoint_cores(tmp_path):
    barrier = tmp_path / "barrier"
    found: dict[str, list[dict]] = {}

    def one(name: str) -> None:
        result = launch.run_horovod(WHERE, ["--barrier", str(barrier), "--peers", "2"], workers=1, timeout=120,
                                    show="none")
        found[name] = wheres(result)

    threads = [threading.Thread(target=one, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    a, b = found["a"][0], found["b"][0]
    assert a["peers_seen"] == b["peers_seen"] == 2            # both alive when they reported
    cores_a, cores_b = set(parse_cores(a["cpus"])), set(parse_cores(b["cpus"]))
    assert cores_a and cores_b and not cores_a & cores_b, (a, b)


@needs_horovod
@pytest.mark.horovod
def test_two_hosts_of_one_machine_through_the_launcher_get_their_own_cores():
    result = launch.run_horovod(WHERE, [], workers=2, horovodrun=launch.Horovodrun(hosts=multiworker.LOCAL_HOSTS),
                                timeout=120, show="none")
    ranks = wheres(result)
    assert [r["rank"] for r in ranks] == [0, 1]
    cores = [set(parse_cores(r["cpus"])) for r in ranks]
    assert all(cores) and not cores[0] & cores[1], ranks       # both are local rank 0, yet apart
    assert result.placement == [sorted(c) for c in cores]


@needs_horovod
@pytest.mark.horovod
def test_a_plain_horovodrun_with_two_hosts_never_confines_both_ranks_to_one_core(tmp_path):
    """No launcher, no grant (a learner's terminal): each rank claims free cores for itself."""
    horovodrun = launch.find_horovodrun()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_PLACEMENT")}
    proc = subprocess.run([horovodrun, "-np", "2", "--gloo", "-H", "localhost:1,127.0.0.1:1",
                           sys.executable, str(WHERE), "--claim", "--barrier", str(tmp_path / "b"),
                           "--peers", "2"], capture_output=True, text=True, timeout=120, env=env,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json
    ranks = [json.loads(line.split(">:", 1)[1]) for line in proc.stdout.splitlines()
             if '"event": "where"' in line]
    assert len(ranks) == 2, proc.stdout
    cores = [set(parse_cores(r["cpus"])) for r in ranks]
    assert not (len(cores[0]) == 1 and cores[0] == cores[1]), ranks
    assert {r["source"] for r in ranks} <= {"claimed", "not pinned (every core is held by other runs)"}


def _holder(count: int) -> subprocess.Popen:
    """Another process that holds ``count`` of the machine's core slots until killed."""
    code = ("import time\nfrom course_lib.runner import slots\nfrom course_lib.training.machine.capacity import "
            f"machine_capacity\ng = slots.acquire(slots.PlaceRequest(machine_capacity('cpu'), {count}, 1), "
            "script='holder.py', timeout_s=60)\nprint('held', g.slots, flush=True)\n"
            "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().startswith("held")
    return proc


@pytest.mark.parametrize("kind", ["mpirun", "workers", "elastic"])
def test_every_launcher_refuses_to_start_on_slots_another_run_holds(kind):
    cores = len(machine_capacity("cpu").ids)
    holder = _holder(cores)
    try:
        with pytest.raises(SlotsBusyError, match=f"pid {holder.pid}, holder.py"):
            if kind == "mpirun":
                multiworker.run_mpirun(WHERE, [], workers=2, timeout=60, wait_for_slots=False)
            elif kind == "workers":
                multiworker.run_workers(WHERE, [], workers=2, worker_envs=[{}, {}], timeout=60,
                                        wait_for_slots=False)
            else:
                multiworker.run_elastic(WHERE, [], timeout=60, wait_for_slots=False)
    finally:
        holder.kill()
        holder.wait()


@needs_horovod
@pytest.mark.horovod
@pytest.mark.parametrize("kind", ["mpirun", "workers"])
def test_multiworker_runs_wait_in_line_then_run_on_their_own_cores(kind):
    holder = _holder(len(machine_capacity("cpu").ids))
    lines: list[str] = []
    killer = threading.Timer(2.0, holder.kill)
    killer.start()
    started = time.monotonic()
    try:
        if kind == "mpirun":
            result = multiworker.run_mpirun(WHERE, [], workers=2, timeout=120, show="all",
                                            output=lines.append)
        else:
            result = multiworker.run_workers(WHERE, [], workers=2, worker_envs=[{}, {}], timeout=120,
                                             show="all", output=lines.append)
    finally:
        killer.cancel()
        holder.kill()
        holder.wait()
    waits = [line for line in lines if line.startswith("waiting for 2 of")]
    assert waits and "holder.py" in waits[0] and time.monotonic() - started >= 2.0
    cores = [set(parse_cores(r["cpus"])) for r in wheres(result)]
    assert len(cores) == 2 and all(cores) and not cores[0] & cores[1]
    assert slots.holders("cpu", machine_capacity("cpu").ids) == []


def test_nothing_is_left_running():
    left = [p for p in psutil.Process().children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE and "where_hvd.py" in " ".join(p.cmdline())]
    assert left == []
