"""Which processes a test module left running: MPI daemons, launchers, watchdogs, course scripts.

``tests/conftest.py`` takes a :func:`snapshot` when the session starts and before every test
module, and after the module (and at the end of the session) asks :func:`new_since` for the
launch-related processes that appeared since and are still alive. Only this session's processes
count: a process is ours when it carries :data:`MARKER` in its environment (every child of pytest
inherits it: horovodrun, mpirun, a local ``orted``, the ranks, the watchdog) or descends from
pytest. The machine is shared, so other people's runs are left out; an orphaned MPI daemon
without the marker (started over ssh) is reported as a warning, because it cannot be told apart
from someone else's.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

import psutil

#: Environment variable set once per test session; its value identifies this session.
MARKER = "COURSE_TEST_SESSION"

#: Process names of MPI daemons and launchers (Open MPI 4: orted; Open MPI 5 / PRRTE: prted, prterun).
NAMES = frozenset({"orted", "prted", "prterun", "mpirun", "mpiexec", "horovodrun"})
#: Command-line pieces of course processes: launchers, watchdogs, supervisors and scripts.
COMMAND_MARKS = ("horovodrun", "course_lib/runner/procs/watchdog.py", "course_lib.runner.procs.supervise",
                 "course_lib/runner/procs/supervise.py", "source_code/", "tests/scripts/")


@dataclass(frozen=True)
class Leftover:
    """One process that outlived its test module."""

    pid: int
    ppid: int
    name: str
    cmdline: str
    ours: bool

    def describe(self) -> str:
        """``pid 123 (ppid 1) orted: orted --hnp-uri ...`` (the command line cut at 160 chars)."""
        return f"pid {self.pid} (ppid {self.ppid}) {self.name}: {self.cmdline[:160]}"


def session_marker() -> str:
    """Set (once) and return this session's marker value in ``os.environ``.

    A pytest-xdist worker inherits its controller's environment, marker included; it takes a marker of its
    own, so that one worker's module check does not count the other worker's launches as its leftovers.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and os.environ.get(MARKER + "_OF") != worker:
        os.environ[MARKER] = uuid.uuid4().hex
        os.environ[MARKER + "_OF"] = worker
    return os.environ.setdefault(MARKER, uuid.uuid4().hex)


def _key(proc: psutil.Process) -> tuple[int, float]:
    return proc.pid, proc.create_time()


def _is_launch_process(proc: psutil.Process) -> bool:
    name = proc.name()
    if name in NAMES:
        return True
    line = " ".join(proc.cmdline())
    return any(mark in line for mark in COMMAND_MARKS)


def _is_ours(proc: psutil.Process, marker: str, root: int) -> bool:
    try:
        if proc.environ().get(MARKER) == marker:
            return True
    except psutil.Error:
        pass
    try:
        return any(parent.pid == root for parent in proc.parents())
    except psutil.Error:
        return False


def snapshot() -> set[tuple[int, float]]:
    """``(pid, start time)`` of every launch-related process alive now (anyone's)."""
    seen = set()
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and _is_launch_process(proc):
                seen.add(_key(proc))
        except psutil.Error:
            continue
    return seen


def new_since(before: set[tuple[int, float]], marker: str, root: int | None = None,
              settle_s: float = 10.0, poll_s: float = 0.25) -> list[Leftover]:
    """Launch-related processes started after ``before`` and still alive after ``settle_s``.

    Args:
        before: A :func:`snapshot` taken earlier.
        marker: This session's :data:`MARKER` value.
        root: The pytest process (default: this process); its descendants are ours.
        settle_s: Seconds granted for processes that are ending anyway (a daemon's shutdown).
        poll_s: Seconds between two scans.

    Returns:
        The leftovers, this session's first (``ours``), then orphaned MPI daemons of unknown origin.
    """
    root = os.getpid() if root is None else root
    me = {os.getpid()}
    deadline = time.monotonic() + settle_s
    while True:
        found = []
        for proc in psutil.process_iter():
            try:
                if (proc.pid in me or proc.status() == psutil.STATUS_ZOMBIE
                        or _key(proc) in before or not _is_launch_process(proc)):
                    continue
                ours = _is_ours(proc, marker, root)
                orphan = proc.ppid() == 1 and proc.name() in NAMES
                if ours or orphan:
                    found.append(Leftover(proc.pid, proc.ppid(), proc.name(),
                                          " ".join(proc.cmdline()), ours))
            except psutil.Error:
                continue
        if not found or time.monotonic() >= deadline:
            return sorted(found, key=lambda item: (not item.ours, item.pid))
        time.sleep(poll_s)
