"""The slot files of :mod:`course_lib.runner.slots`: where they live, how they are locked, who holds them.

A slot is the file ``slot-NN.lock`` in the shared folder (``$COURSE_SLOTS_DIR``, default
``/tmp/course-slots``); it is held while some process holds an exclusive ``fcntl.flock`` on it,
and the holder's details (user, pid, script, workers, start, timeout) are written into it. Queue
tickets (``queue/t-…``) are locked the same way, so a dead waiter's ticket is recognised and
removed. This module only reads and probes those files; :mod:`course_lib.runner.slots` takes and
queues.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_DIR", "Holder", "slots_dir", "holders", "open_lock", "try_lock", "live_tickets"]

DEFAULT_DIR = "/tmp/course-slots"


@dataclass
class Holder:
    """Who holds one slot (read from the slot file while it is locked)."""

    slot: int
    user: str = "?"
    pid: int = 0
    script: str = "?"
    workers: int = 0
    started: float = 0.0
    timeout_s: float | None = None

    def describe(self, now: float) -> str:
        """e.g. ``"alice (pid 4242, horovod_fmnist.py, 2 workers, running 35 s)"``."""
        return (f"{self.user} (pid {self.pid}, {self.script}, {self.workers} worker"
                f"{'s' if self.workers != 1 else ''}, running {max(0.0, now - self.started):.0f} s)")


def slots_dir() -> Path:
    """The shared folder of slot files: ``$COURSE_SLOTS_DIR`` or ``/tmp/course-slots``
    (created with mode 1777 when missing)."""
    path = Path(os.environ.get("COURSE_SLOTS_DIR") or DEFAULT_DIR)
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(path, 0o1777)
        except OSError:
            pass
    (path / "queue").mkdir(exist_ok=True)
    try:
        os.chmod(path / "queue", 0o1777)
    except OSError:
        pass
    return path


def open_lock(path: Path) -> int:
    """Open (create, mode 0666) a lock file; read-only if another user's file is not writable."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY)
    try:
        os.fchmod(fd, 0o666)
    except OSError:
        pass
    return fd


def try_lock(fd: int) -> bool:
    """Take an exclusive lock on ``fd`` without waiting; ``False`` if someone holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _read_holder(path: Path, slot: int) -> Holder:
    """The holder written into a slot file (unknown fields stay "?")."""
    try:
        info = json.loads(path.read_text() or "{}")
        return Holder(slot=slot, **{k: info[k] for k in
                                    ("user", "pid", "script", "workers", "started", "timeout_s")
                                    if k in info})
    except (OSError, ValueError, TypeError):
        return Holder(slot=slot)


def holders(total: int, directory: Path | None = None) -> list[Holder]:
    """The slots among the first ``total`` that are held now, with their holders."""
    folder = directory or slots_dir()
    found = []
    for slot in range(total):
        path = folder / f"slot-{slot:02d}.lock"
        if not path.exists():
            continue
        fd = open_lock(path)
        try:
            if try_lock(fd):
                continue  # free (our probe lock is dropped by the close below)
            found.append(_read_holder(path, slot))
        finally:
            os.close(fd)
    return found


def live_tickets(queue_dir: Path) -> list[Path]:
    """Queue tickets whose waiter is alive (its lock is held), oldest first."""
    live = []
    for ticket in sorted(queue_dir.glob("t-*")):
        try:
            fd = os.open(ticket, os.O_RDONLY)
        except OSError:
            continue
        try:
            if not try_lock(fd):
                live.append(ticket)
            else:  # its waiter died: clean up if we may
                try:
                    ticket.unlink()
                except OSError:
                    pass
        finally:
            os.close(fd)
    return live
