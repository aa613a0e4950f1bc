"""A killed caller leaves nothing running: course_lib.runner.procs.watchdog, with real horovodrun runs.

A real Jupyter kernel (jupyter_client) and a plain Python process each launch a 2-worker Horovod
run of tests/scripts/sleep_hvd.py and are then killed with SIGKILL (no ``finally`` of theirs
runs). Within 10 s no process of the run may be left, checked by two independent means: the pids
recorded while the run went on (the caller's descendants and every process carrying the test's
marker), and a fresh scan of all processes for that marker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest
from procscan import processes_with

from course_lib.runner.procs.processes import ProcessSpec, stream_command

SLEEP = Path(__file__).parent / "scripts" / "sleep_hvd.py"
ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 10.0
needs_horovod = pytest.mark.requires("horovodrun")


@pytest.fixture(autouse=True)
def private_slots(tmp_path, monkeypatch):
    """Slots of these tests live in a folder of their own (other users of the machine do not count)."""
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSE_SLOTS", "2")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")




def live(pids: set[tuple[int, float]]) -> list[int]:
    """Those of ``pids`` ((pid, create_time)) still running as the same process, not zombies."""
    alive = []
    for pid, created in pids:
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


def run_pids(caller: int, mark: str) -> set[tuple[int, float]]:
    """The caller's descendants and every process carrying ``mark``, as (pid, create_time)."""
    procs = []
    try:
        procs += psutil.Process(caller).children(recursive=True)
    except psutil.Error:
        pass
    procs += [psutil.Process(pid) for pid in processes_with(mark) if psutil.pid_exists(pid)]
    seen = set()
    for proc in procs:
        try:
            seen.add((proc.pid, proc.create_time()))
        except psutil.Error:
            continue
    return seen


def wait_until_gone(pids: set[tuple[int, float]], mark: str) -> float:
    """Seconds until neither a recorded pid nor a marked process is left (at most DEADLINE_S + 5)."""
    start = time.monotonic()
    while time.monotonic() - start < DEADLINE_S + 5:
        if not live(pids) and not processes_with(mark):
            return time.monotonic() - start
        time.sleep(0.1)
    return time.monotonic() - start


def launch_code(mark: str, stubborn: bool) -> str:
    extra = ', "--stubborn"' if stubborn else ""
    return textwrap.dedent(f"""
        from course_lib.runner.launch import run_horovod
        run_horovod({str(SLEEP)!r}, ["--marker", {mark!r}{extra}], workers=2, show="all", timeout=600)
    """)


@needs_horovod
@pytest.mark.horovod
def test_plain_python_caller_killed_with_sigkill_leaves_nothing():
    mark = f"test-{uuid.uuid4().hex}"
    caller = subprocess.Popen([sys.executable, "-c", launch_code(mark, stubborn=True)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        up = 0
        for line in caller.stdout:  # both ranks are up (they ignore SIGINT and SIGTERM)
            up += "sleeping" in line
            if up == 2:
                break
        assert up == 2
        pids = run_pids(caller.pid, mark)
        assert len(pids) >= 4  # watchdog, horovodrun, two ranks (and Gloo's shells)
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=10)
        took = wait_until_gone(pids, mark)
        assert live(pids) == [] and processes_with(mark) == []
        assert took < DEADLINE_S
    finally:
        if caller.poll() is None:
            caller.kill()


@needs_horovod
@pytest.mark.horovod
def test_jupyter_kernel_killed_with_sigkill_leaves_nothing():
    from jupyter_client.manager import KernelManager

    mark = f"test-{uuid.uuid4().hex}"
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(ROOT), env={**os.environ})
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        kc.execute(launch_code(mark, stubborn=False))
        up, deadline = 0, time.monotonic() + 180
        while up < 2 and time.monotonic() < deadline:
            try:
                msg = kc.get_iopub_msg(timeout=5)
            except Exception:  # queue.Empty: keep polling for start-up
                continue
            if msg["msg_type"] == "stream":
                up += msg["content"]["text"].count("sleeping")
        assert up >= 2  # both ranks printed, streamed through the kernel
        kernel_pid = km.provisioner.process.pid
        pids = run_pids(kernel_pid, mark)
        assert len(pids) >= 4
        os.kill(kernel_pid, signal.SIGKILL)
        took = wait_until_gone(pids, mark)
        assert live(pids) == [] and processes_with(mark) == []
        assert took < DEADLINE_S
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def of(*command: str) -> ProcessSpec:
    """A run of ``command`` with the defaults."""
    return ProcessSpec(command)


def test_watchdog_mirrors_exit_status_and_death_by_signal():
    code = "import os, signal, sys; print('x', flush=True); sys.exit(int(sys.argv[1]))"
    assert stream_command(of(sys.executable, "-c", code, "3"), lambda line, s: None).returncode == 3
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    outcome = stream_command(of(sys.executable, "-c", kill), lambda line, s: None)
    assert outcome.returncode == -signal.SIGKILL
    with pytest.raises(FileNotFoundError):
        stream_command(of("/no/such/program"), lambda line, s: None)


def test_caller_killed_ends_a_grandchild_in_its_own_session(tmp_path):
    """No Horovod needed: a run whose child starts a grandchild in a new session (as Gloo does)."""
    mark = f"test-{uuid.uuid4().hex}"
    run = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
           "'import time; time.sleep(600)', sys.argv[1]], start_new_session=True); "
           "print('up', flush=True); time.sleep(600)")
    code = textwrap.dedent(f"""
        import sys
        from course_lib.runner.procs.processes import ProcessSpec, stream_command
        stream_command(ProcessSpec((sys.executable, "-c", {run!r}, {mark!r})), lambda line, s: print(line, flush=True))
    """)
    caller = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert caller.stdout.readline().strip() == "up"
        time.sleep(0.6)  # the watchdog records descendants every 0.25 s
        pids = run_pids(caller.pid, mark)
        assert len(processes_with(mark)) == 4 and len(pids) >= 3  # caller, watchdog, run, grandchild
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=10)
        took = wait_until_gone(pids, mark)
        assert live(pids) == [] and processes_with(mark) == [] and took < DEADLINE_S
    finally:
        if caller.poll() is None:
            caller.kill()
