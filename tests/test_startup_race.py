"""An interrupt that races a run's start-up leaves nothing running (issue 31, item 5).

Horovod's Gloo launcher starts each rank in a session of its own through a middleman; when
``horovodrun`` is ended while it is still starting ranks, a rank whose parents died first used to be
re-parented to init, out of the tree the launcher and the watchdog walk (2 of 10 such interrupts
left a rank running). The watchdog is now a child subreaper and sweeps its tree before it exits,
and the launcher no longer SIGKILLs it first (course_lib/runner/procs/watchdog.py, processes.py).

Here 21 launches of ``tests/scripts/sleep_hvd.py`` are interrupted at different moments of
start-up (issue 31 asks for at least 20, a third with stubborn ranks: 7 here): 6 from the output callback
(at the first line of any kind, at the first and at the second rank's "sleeping" line) and 15 by a real
SIGINT to this process, as Jupyter's Interrupt sends to a kernel, at delays from 0.1 s (slot grant,
horovodrun's own start) to 4 s (a start-up slowed by a busy machine). The ranks print their first
line about 0.85 s after the call on a quiet 2-core machine (horovodrun's build check no longer holds them
back 5 s: course_lib/runner/horovodrun.py), so most delays fall while the ranks are being spawned. A third of them run ranks that ignore SIGINT and SIGTERM (``--stubborn``: a rank stuck in
a collective or a C call), and a third ranks that, when signalled, start a process in a session of
their own and exit at once (``--spawn-on-signal``): the window itself, a rank born while the run is
being ended whose parent dies first, hit on purpose every time (without the subreaper, each of those
launches leaves that process behind, re-parented to init). After every launch, and once more at the
end, no process of any of them may be alive.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from course_lib.runner.launch import run_horovod

SLEEP = Path(__file__).parent / "scripts" / "sleep_hvd.py"
GRACE = (0.5, 0.5)  # short SIGINT/SIGTERM grace periods: the test is about the start-up window
CALLBACK_POINTS = [("any", 1), ("sleeping", 1), ("sleeping", 2)]
# 0.1 s apart where the ranks are being spawned on a quiet machine (about 0.85 s), wider beyond; 15 delays,
# so that with the 6 callback points a third of the 21 launches (7) have stubborn ranks.
SIGINT_DELAYS = [0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.7, 2.0, 3.0, 4.0]
ALL_MARKS: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def nothing_left_later():
    """Once more, after all of this file's selected launches: nothing appeared late (a rank that was still being
    spawned). A teardown, not a test, so that it holds for whichever of the launches a maintainer selects
    (``pytest -k launch`` once selected a test of it without the launches it checks: issue 47)."""
    yield
    if ALL_MARKS:
        time.sleep(2.0)
        late = [p for mark in ALL_MARKS for p in left_with(mark)]
        assert late == [], f"processes of interrupted launches appeared after their tests ended: {late}"


@pytest.fixture(autouse=True)
def private_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.delenv("COURSE_SLOTS", raising=False)


def left_with(mark: str) -> list[str]:
    """Live processes whose command line holds ``mark`` (zombies excluded)."""
    found = []
    for proc in psutil.process_iter(["pid", "ppid", "cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                    mark in arg for arg in proc.info["cmdline"] or ()):
                found.append(f"pid {proc.pid} (ppid {proc.info['ppid']}): "
                             f"{' '.join(proc.info['cmdline'])[:120]}")
        except psutil.Error:
            continue
    return found


def launch(mark: str, kind: str, on_line) -> None:
    args = ["--marker", mark] + {"plain": [], "stubborn": ["--stubborn"],
                                 "late": ["--spawn-on-signal"]}[kind]
    run_horovod(SLEEP, args, workers=2, output=on_line, show="all", timeout=120, grace_s=GRACE)


def assert_nothing_left(mark: str) -> None:
    # Processes in the middle of dying get a moment: 1 s was too short at load 11-14 (2026-11-26, at ad3ba5f:
    # the watchdog of the [0.2] launch, --grace 0.5 0.5, still alive after 1 s). A leaked rank lives on.
    deadline = time.monotonic() + 5.0
    while left_with(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left_with(mark) == []


def _rank_kind(index: int) -> str:
    """A third each: plain ranks, stubborn ranks, ranks that spawn a late process when signalled."""
    return ("plain", "late", "stubborn")[index % 3]


@pytest.mark.requires("horovodrun")
@pytest.mark.horovod
@pytest.mark.parametrize("point", range(2 * len(CALLBACK_POINTS)))
def test_interrupt_from_the_output_callback_during_start_up(point):
    kind, nth = CALLBACK_POINTS[(point // 2) % len(CALLBACK_POINTS)]
    kind_of_ranks = _rank_kind(point)
    mark = f"race-{uuid.uuid4().hex}"
    ALL_MARKS.append(mark)
    seen = [0]

    def on_line(line: str) -> None:
        if kind == "any" or "sleeping" in line:
            seen[0] += 1
            if seen[0] == nth:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        launch(mark, kind_of_ranks, on_line)
    assert_nothing_left(mark)


@pytest.mark.requires("horovodrun")
@pytest.mark.horovod
@pytest.mark.parametrize("delay", SIGINT_DELAYS)
def test_sigint_to_the_caller_during_start_up(delay):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, \
        f"an earlier test left SIGINT handled by {signal.getsignal(signal.SIGINT)!r}"
    kind_of_ranks = _rank_kind(SIGINT_DELAYS.index(delay))
    mark = f"race-{uuid.uuid4().hex}"
    ALL_MARKS.append(mark)
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))  # as Jupyter's Interrupt
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            launch(mark, kind_of_ranks, lambda line: None)
            time.sleep(30)  # the run lasts forever; only an interrupt that came too late lands here
    finally:
        timer.cancel()
    assert_nothing_left(mark)
