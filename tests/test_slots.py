"""Machine-wide slots (course_lib.runner.slots) and how the launcher uses them.

Every test points ``COURSE_SLOTS_DIR`` at a folder of its own and uses a small fake number of
slots (``COURSE_SLOTS``), so the machine's real users do not matter. Other holders are real
processes: a second Python process holds slots, waits, or is killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from pathlib import Path

import psutil
import pytest

from course_lib.runner import launch, launchers, slots
from course_lib.runner.launch import LaunchError, RunStoppedError, SlotsBusyError, run_python
from course_lib.runner.procs import processes
from course_lib.runner.procs.processes import ProcessOutcome
from course_lib.training.machine import capacity
from course_lib.training.machine.capacity import Capacity
from course_lib.training.machine.placement import PLACEMENT_ENV, Placement

#: A fake machine of two core slots (ids 0 and 1), whatever this machine has.
CAP2 = Capacity("cpu", (0, 1), 0, (0, 1))


def want(count: int) -> slots.PlaceRequest:
    """A request for ``count`` of :data:`CAP2`'s slots, one worker each."""
    return slots.PlaceRequest(CAP2, count, count)


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def private_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSE_SLOTS", "2")
    return tmp_path / "slots"


def holder_process(count: int, script: str = "holder.py") -> subprocess.Popen:
    """Another process that holds ``count`` of 2 slots until killed (prints 'held' first)."""
    code = textwrap.dedent(f"""
        import time
        from course_lib.runner import slots
        from course_lib.training.machine.capacity import Capacity
        cap = Capacity("cpu", (0, 1), 0, (0, 1))
        grant = slots.acquire(slots.PlaceRequest(cap, {count}, {count}), script={script!r}, timeout_s=300)
        print("held", grant.slots, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    if not proc.stdout.readline().startswith("held"):
        proc.kill()
        proc.wait()
        raise AssertionError("the holder process could not take its slots")
    return proc


def test_busy_slots_fail_clearly_when_asked_not_to_wait():
    holder = holder_process(2, "horovod_fmnist.py")
    try:
        with pytest.raises(SlotsBusyError) as info:
            slots.acquire(want(1), wait=False)
        message = str(info.value)
        assert f"pid {holder.pid}" in message and "horovod_fmnist.py" in message
        assert "2 workers" in message and "wait_for_slots=True" in message
        found = slots.holders("cpu", (0, 1))
        assert [(h.slot, h.pid) for h in found] == [(0, holder.pid), (1, holder.pid)]
    finally:
        holder.kill()
        holder.wait()


def test_a_launch_that_does_not_fit_waits_with_position_holders_and_estimate():
    holder = holder_process(1, "first.py")
    messages: list[str] = []
    try:
        one = slots.acquire(want(1), wait=False)  # fits beside the holder
        assert one.slots == [1]
        one.release()
        timer = threading.Timer(1.5, holder.kill)
        timer.start()
        with slots.acquire(want(2), notify=messages.append, poll_s=0.1) as grant:
            assert grant.slots == [0, 1] and grant.waited_s >= 1.0
        timer.join()
    finally:
        holder.kill()
        holder.wait()
    assert len(messages) >= 1
    first = messages[0]
    assert "waiting for 2 of 2 slots: position 1 in line" in first
    assert f"pid {holder.pid}, first.py, 1 worker" in first
    assert "estimate: a slot frees within" in first  # the holder set timeout_s=300


def test_slots_of_a_holder_killed_with_sigkill_come_back():
    holder = holder_process(2)
    with pytest.raises(SlotsBusyError):
        slots.acquire(want(2), wait=False)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with slots.acquire(want(2), wait=False) as grant:  # no stale lock
        assert grant.slots == [0, 1]


def test_the_oldest_waiter_goes_first_and_dead_waiters_are_skipped(private_slots):
    slots.slots_dir()
    stale = private_slots / "queue" / "t-00000000000000000001-1-dead"
    stale.write_text("")  # a ticket nobody holds: its waiter died
    holder = holder_process(2)
    waiter = subprocess.Popen(  # queues before us for 1 slot
        [sys.executable, "-c", "from course_lib.runner import slots; "
         "from course_lib.training.machine.capacity import Capacity; "
         "g = slots.acquire(slots.PlaceRequest(Capacity('cpu', (0, 1), 0, (0, 1)), 1, 1), notify=lambda m: print(m, flush=True), poll_s=0.1); "
         "print('granted', g.slots, flush=True)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert "position 1 in line" in waiter.stdout.readline()  # the stale ticket is ignored
        messages: list[str] = []
        thread = threading.Thread(target=lambda: messages.append(
            slots.acquire(want(1), notify=messages.append, poll_s=0.1)))
        thread.start()
        deadline = time.monotonic() + 20
        while not messages and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "position 2 in line" in messages[0]
        holder.kill()
        assert waiter.stdout.readline().startswith("granted")
        thread.join(20)
        grant = messages[-1]
        assert isinstance(grant, slots.SlotGrant)
        grant.release()
    finally:
        for proc in (holder, waiter):
            proc.kill()
            proc.wait()


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_two_concurrent_launches_second_waits_then_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SLOTS", "1")
    script = tmp_path / "hold.py"
    script.write_text("import sys, time\nprint('start', time.time(), flush=True)\n"
                      "time.sleep(float(sys.argv[1]))\nprint('end', time.time(), flush=True)\n")
    first_lines: list[str] = []
    first = threading.Thread(target=run_python, args=(script, ["2"]),
                             kwargs={"output": first_lines.append, "timeout": 60})
    first.start()
    deadline = time.monotonic() + 30
    while not first_lines and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(SlotsBusyError, match="hold.py"):
        run_python(script, ["0"], wait_for_slots=False, timeout=60)
    second_lines: list[str] = []
    second = run_python(script, ["0"], output=second_lines.append, timeout=60)
    first.join()
    assert second.returncode == 0
    waits = [line for line in second_lines if line.startswith("waiting for 1 of 1 slots")]
    assert len(waits) == 1 and "hold.py" in waits[0]
    first_end = float(next(line for line in first_lines if line.startswith("end")).split()[1])
    second_start = float(next(line for line in second_lines if line.startswith("start")).split()[1])
    assert second_start >= first_end  # it ran only after the first had ended


def test_stop_while_waiting_for_slots_launches_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SLOTS", "1")
    holder = holder_process(1)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()

    def must_not_start(*args, **kwargs):
        raise AssertionError("a process was started while the slots were busy")

    monkeypatch.setattr(processes, "stream_command", must_not_start)
    try:
        with pytest.raises(RunStoppedError, match="while it waited for slots"):
            run_python(ROOT / "tests" / "scripts" / "sleep_hvd.py", stop_event=stop,
                       output=lambda line: None)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("cores, workers, oversubscribe, shares", [
    ((0, 1, 2, 3), 2, False, [[0], [1]]),             # one core per worker, the lowest free first
    ((0, 1), 4, True, [[0], [1], [0], [1]]),           # oversubscribed: all slots, ranks wrap round
    ((4, 5, 6, 7), 1, False, [[4]]),                   # a cpuset's own core ids
])
def test_each_rank_gets_its_share_of_the_grant(cores, workers, oversubscribe, shares,
                                                monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_SLOTS")
    monkeypatch.setattr(capacity, "cpu_core_ids", lambda: cores)
    monkeypatch.setattr("course_lib.runner.slots.gpu_count", lambda: 0)
    monkeypatch.setattr(launchers, "find_horovodrun", lambda python: "/bin/true")
    script = tmp_path / "train.py"
    script.write_text("# any script\n")
    seen = {}

    def fake_stream(launch, on_line, *, env, hold_fds, **kwargs):
        seen.update(command=list(launch.argv), env=env, held=slots.holders("cpu", cores), fds=list(hold_fds))
        return ProcessOutcome(0, 0.1, "exited", [1])

    monkeypatch.setattr(processes, "stream_command", fake_stream)
    plan = capacity.plan_workers(gpus=0).with_workers(workers, oversubscribe=oversubscribe)
    result = launch.run_horovod(script, ["--x"], workers=plan)
    granted = min(workers, len(cores))
    assert [h.pid for h in seen["held"]] == [os.getpid()] * granted  # held during the run
    assert len(seen["fds"]) == granted  # and handed to the watchdog
    assert slots.holders("cpu", cores) == []  # released after it
    placement = Placement.from_env(seen["env"][PLACEMENT_ENV])
    assert [list(share.cpus) for share in placement.shares] == shares == result.placement
    command = seen["command"]
    at = command.index("course_lib.runner.place_rank")   # every rank starts through the wrapper
    assert command[at - 1] == "-m" and command[at + 2:] == [str(script), "--x"]  # args untouched


def test_bad_slot_settings_are_rejected(monkeypatch):
    monkeypatch.setenv("COURSE_SLOTS", "zero")
    with pytest.raises(LaunchError, match="COURSE_SLOTS='zero' must be a positive int"):
        run_python(ROOT / "tests" / "scripts" / "sleep_hvd.py")
    monkeypatch.setenv("COURSE_SLOTS", "2")
    with pytest.raises(LaunchError, match="workers=-1 must be an int >= 0"):
        run_python(ROOT / "tests" / "scripts" / "sleep_hvd.py", workers=-1)
    with pytest.raises(LaunchError, match="cannot hold 3 of the machine's 2 slots"):
        slots.acquire(want(3))
    monkeypatch.setenv("COURSE_SLOTS", "999")
    with pytest.raises(LaunchError, match="COURSE_SLOTS=999 exceeds this machine's"):
        run_python(ROOT / "tests" / "scripts" / "sleep_hvd.py")


def test_nothing_is_left_running():
    """No run of this file (a watchdog or a test script) outlives it. Other children of pytest, such
    as the browser tests' session-wide Playwright driver, are not this file's business."""
    def ours(proc: psutil.Process) -> bool:
        try:
            line = " ".join(proc.cmdline())
            return proc.status() != psutil.STATUS_ZOMBIE and (
                "watchdog.py" in line or "tests/scripts/" in line or "horovodrun" in line)
        except psutil.Error:
            return False

    left = [p for p in psutil.Process().children(recursive=True) if ours(p)]
    assert left == [], [" ".join(p.cmdline()) for p in left]
