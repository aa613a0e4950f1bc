"""Machine-wide worker slots: concurrent learners share one server fairly, and no lock goes stale.

A slot is one CPU core (or one GPU where there are GPUs). The slots of a machine are the files
``slot-00.lock`` … in one shared folder, ``$COURSE_SLOTS_DIR`` (default ``/tmp/course-slots``,
created world-writable with the sticky bit, like ``/tmp``); how many there are is
``$COURSE_SLOTS`` or, by default, the machine's GPUs or cores. A run holds a slot by holding an
exclusive ``fcntl.flock`` on its file for its whole life, in the launching process and in the
run's watchdog (:mod:`course_lib.runner.watchdog`). The operating system drops a ``flock`` when
the last process holding it ends, however it ends (SIGKILL included), so a crash never leaves a
stale lock, and the slots come free only once the run's processes are gone.

A launch that does not fit queues: it holds a ticket file (locked the same way, so the tickets
of dead waiters are ignored), and the oldest live ticket is served first, so a large request is
not starved by small ones. While it waits, a message says its position, who holds the slots
(user, pid, script, workers, for how long) and an estimate. With ``wait=False`` it raises
:class:`SlotsBusyError` naming the holders instead.

The slot files themselves (folder, locks, holders) are read in :mod:`course_lib.runner.slot_files`.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from course_lib.runner.preflight import LaunchError
from course_lib.runner.slot_files import (
    DEFAULT_DIR, Holder, holders, live_tickets, open_lock, slots_dir, try_lock)

__all__ = ["SlotsBusyError", "SlotWaitCancelled", "Holder", "SlotGrant", "slots_dir",
           "total_slots", "holders", "acquire", "DEFAULT_DIR"]

class SlotsBusyError(LaunchError):
    """The slots asked for are held by other runs and the caller asked not to wait."""


class SlotWaitCancelled(RuntimeError):
    """A launch waiting for slots was stopped (its ``stop_event`` was set)."""


@dataclass
class SlotGrant:
    """Slots held by this process until :meth:`release` (also a context manager).

    Attributes:
        slots: Indices of the slots held. fds: Their locked file descriptors (pass them to the
        watchdog, which keeps them locked until the run's processes are gone).
        total: Slots of the machine. waited_s: Seconds spent in the queue.
    """

    slots: list[int]
    fds: list[int]
    total: int
    waited_s: float = 0.0
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Close the lock files (the slots are free once no other holder of them remains)."""
        if not self._released:
            self._released = True
            for fd in self.fds:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def __enter__(self) -> "SlotGrant":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def total_slots(default: int) -> int:
    """``$COURSE_SLOTS`` (a positive int) if set, else ``default`` (the machine's GPUs or cores).

    Raises:
        LaunchError: If ``$COURSE_SLOTS`` is not a positive int.
    """
    raw = os.environ.get("COURSE_SLOTS")
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise LaunchError(f"COURSE_SLOTS={raw!r} must be a positive int (the machine's worker "
                          "slots); unset it to use the machine's cores or GPUs")
    return int(raw)


def _take(count: int, total: int, folder: Path, info: dict) -> tuple[list[int], list[int]]:
    """Lock ``count`` free slots (all or none); write ``info`` into each."""
    slots: list[int] = []
    fds: list[int] = []
    for slot in range(total):
        if len(slots) == count:
            break
        fd = open_lock(folder / f"slot-{slot:02d}.lock")
        if try_lock(fd):
            slots.append(slot)
            fds.append(fd)
        else:
            os.close(fd)
    if len(slots) < count:
        for fd in fds:
            os.close(fd)
        return [], []
    data = json.dumps(info).encode()
    for fd in fds:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except OSError:  # another user's read-only file: the holder shows as "?"
            pass
    return slots, fds


def _estimate(found: list[Holder], now: float) -> str:
    bounds = [h.started + h.timeout_s - now for h in found if h.timeout_s]
    if found and len(bounds) == len(found):
        return f"a slot frees within {max(0.0, min(bounds)):.0f} s at the latest (the holders' timeouts)"
    return "no upper bound (a holder set no timeout); runs of this course take minutes"


def acquire(count: int, *, total: int, script: str = "?", workers: int = 0,
            timeout_s: float | None = None, wait: bool = True,
            notify: Callable[[str], None] = print, stop_event: threading.Event | None = None,
            poll_s: float = 0.5, directory: Path | None = None) -> SlotGrant:
    """Hold ``count`` of the machine's ``total`` slots, waiting in line if they are taken.

    Args:
        count: Slots wanted, 1 <= count <= total.
        total: Slots of the machine (:func:`total_slots`).
        script, workers, timeout_s: What the waiting messages of others show about this run.
        wait: ``False``: raise :class:`SlotsBusyError` instead of waiting.
        notify: Called with each waiting message (when the position or the holders change).
        stop_event: When set, waiting ends with :class:`SlotWaitCancelled`.
        poll_s: Seconds between two looks at the slots. directory: Default :func:`slots_dir`.

    Returns:
        The :class:`SlotGrant` (release it, or use it as a context manager).

    Raises:
        LaunchError: ``count`` outside 1..total. SlotsBusyError: Busy and ``wait=False``.
        SlotWaitCancelled: ``stop_event`` was set while waiting.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= total:
        raise LaunchError(f"cannot hold {count!r} of the machine's {total} slots")
    folder = directory or slots_dir()
    info = {"user": getpass.getuser(), "pid": os.getpid(), "script": script,
            "workers": workers, "started": time.time(), "timeout_s": timeout_s}
    mutex = open_lock(folder / "mutex.lock")
    ticket_fd, ticket = None, None
    started, last_message = time.monotonic(), None
    try:
        while True:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            try:
                line = live_tickets(folder / "queue")
                ahead = line[:line.index(ticket)] if ticket is not None and ticket in line else line
                if not ahead:
                    info["started"] = time.time()
                    slots, fds = _take(count, total, folder, info)
                    if slots:
                        return SlotGrant(slots, fds, total, time.monotonic() - started)
                found = holders(total, folder)
            finally:
                fcntl.flock(mutex, fcntl.LOCK_UN)
            now = time.time()
            who = "; ".join(h.describe(now) for h in found) or "nobody (they are being freed)"
            if not wait:
                waiting = f"; {len(ahead)} launch(es) already waiting" if ahead else ""
                raise SlotsBusyError(
                    f"{count} of this machine's {total} slots are not free{waiting}. Held by: "
                    f"{who}. Wait for them (wait_for_slots=True), use fewer workers, or ask "
                    "their owners to stop")
            if ticket is None:  # join the line: lock first, then make the ticket visible
                tmp = folder / "queue" / f".new-{uuid.uuid4().hex}"
                ticket_fd = open_lock(tmp)
                fcntl.flock(ticket_fd, fcntl.LOCK_EX)
                ticket = folder / "queue" / f"t-{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
                os.rename(tmp, ticket)
                continue
            message = (f"waiting for {count} of {total} slots: position {len(ahead) + 1} in line; "
                       f"held by {who}; estimate: {_estimate(found, now)}")
            key = (len(ahead), tuple((h.pid, h.slot) for h in found))
            if key != last_message:
                notify(message)
                last_message = key
            if stop_event is not None and stop_event.wait(poll_s):
                raise SlotWaitCancelled("stopped while waiting for slots")
            if stop_event is None:
                time.sleep(poll_s)
    finally:
        os.close(mutex)
        if ticket_fd is not None:
            try:
                os.unlink(ticket)  # type: ignore[arg-type]
            except OSError:
                pass
            os.close(ticket_fd)
