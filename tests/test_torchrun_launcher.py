"""torchrun through the course's launcher (course_lib.runner.torchrun): prefixes, placement, and no leftovers.

The ranks run in notebook 07's second venv (.venv-07, the ``frameworks-venv`` component); the launcher, as in the
notebook, runs in this one. A real 2-rank Gloo group of tests/scripts/sleep_ddp.py is ended from the caller's side
in the two ways a notebook ends it: a real SIGINT in the caller (Jupyter's Interrupt) and a SIGKILL of the caller
(a killed kernel). Within 10 s no process of the run may be left: the pids recorded while it ran, and a fresh scan
for the test's marker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from procscan import processes_with
from test_watchdog import DEADLINE_S, live, run_pids, wait_until_gone

from course_lib.runner.preflight import LaunchError
from course_lib.runner.runlog import names_stream, parse_line
from course_lib.runner.torchrun import build_torchrun_command, run_torchrun

ROOT = Path(__file__).resolve().parents[1]
SLEEP = Path(__file__).parent / "scripts" / "sleep_ddp.py"
needs_venv = pytest.mark.requires("frameworks-venv")


@pytest.fixture(autouse=True)
def private_slots(tmp_path, monkeypatch):
    """Slots of these tests live in a folder of their own (other users of the machine do not count)."""
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSE_SLOTS", "2")


def frameworks_python() -> str:
    from course_lib.environment.frameworks import frameworks_python as find

    return str(find())


def test_torchrun_prefixes_parse_to_ranks_and_keep_the_pipes_stream():
    rank, stream, text, event = parse_line('[default1]:{"event": "digest", "rank": 1, "digest": "ab"}')
    assert (rank, text) == (1, '{"event": "digest", "rank": 1, "digest": "ab"}') and event["digest"] == "ab"
    assert parse_line("[default0]:epoch 1")[:3] == (0, "stdout", "epoch 1")
    assert parse_line("[trainer12]:x")[0] == 12
    assert parse_line("W1128 08:10:51 torch/distributed/run.py:874] ***")[0] is None  # torchrun's own line
    assert not names_stream("[default1]:boom") and names_stream("[1]<stderr>:boom")


def test_the_command_puts_the_rank_wrapper_behind_no_python():
    placed = build_torchrun_command("/v/bin/python", 2, ["s.py", "--json"], log_dir="L", wrapper=("w", "-m", "pr"),
                                    extra=["--max-restarts", "1"])
    assert placed == ["/v/bin/python", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                      "--nproc-per-node", "2", "--tee", "3", "--log-dir", "L", "--max-restarts", "1",
                      "--no-python", "w", "-m", "pr", "/v/bin/python", "s.py", "--json"]
    assert build_torchrun_command("p", 1, ["s.py"], log_dir="L")[-1] == "s.py"


def test_bad_input_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(LaunchError, match="positive int"):
        run_torchrun(SLEEP, workers=0)
    with pytest.raises(LaunchError, match="has no torch"):
        run_torchrun(SLEEP, workers=2, python=sys.executable)  # the course's venv has no torch
    with pytest.raises(LaunchError, match="not found|does not exist|no such"):
        run_torchrun(tmp_path / "missing.py", workers=2)


def launch_code(mark: str, stubborn: bool) -> str:
    extra = ', "--stubborn"' if stubborn else ""
    return textwrap.dedent(f"""
        from course_lib.runner.torchrun import run_torchrun
        run_torchrun({str(SLEEP)!r}, ["--marker", {mark!r}{extra}], workers=2, python={frameworks_python()!r},
                     show="all", timeout=600)
    """)


@needs_venv
@pytest.mark.slow
def test_a_real_sigint_in_the_caller_ends_every_process_of_the_run():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, \
        f"an earlier test left SIGINT handled by {signal.getsignal(signal.SIGINT)!r}"
    mark = f"test-{uuid.uuid4().hex}"
    lines: list[str] = []
    seen: set[tuple[int, float]] = set()

    def on_line(line: str) -> None:
        lines.append(line)
        if sum("sleeping" in x for x in lines) == 2 and "sleeping" in line:
            seen.update(run_pids(os.getpid(), mark))
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()  # as Jupyter's Interrupt does

    with pytest.raises(KeyboardInterrupt):
        run_torchrun(SLEEP, ["--marker", mark], workers=2, python=frameworks_python(), output=on_line, show="all",
                     timeout=120)
    ranks = sorted(parse_line(x)[0] for x in lines if "sleeping" in x)
    assert ranks == [0, 1]
    cores = [x.split("cores ")[1].split(" sleeping")[0] for x in lines if "sleeping" in x]
    assert len(set(cores)) == 2  # each rank on its own granted core
    assert len(seen) >= 4  # watchdog, torchrun, two ranks
    took = wait_until_gone(seen, mark)
    assert live(seen) == [] and processes_with(mark) == []
    assert took < DEADLINE_S


@needs_venv
@pytest.mark.slow
def test_a_sigkilled_caller_leaves_no_process_of_the_run():
    mark = f"test-{uuid.uuid4().hex}"
    caller = subprocess.Popen([sys.executable, "-c", launch_code(mark, stubborn=True)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        up = 0
        for line in caller.stdout:  # both ranks joined the group (they ignore SIGINT and SIGTERM)
            up += "sleeping" in line
            if up == 2:
                break
        assert up == 2
        pids = run_pids(caller.pid, mark)
        assert len(pids) >= 4
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=10)
        took = wait_until_gone(pids, mark)
        assert live(pids) == [] and processes_with(mark) == []
        assert took < DEADLINE_S
    finally:
        if caller.poll() is None:
            caller.kill()
