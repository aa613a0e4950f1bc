"""The machine-wide slot files: where they live, how they are locked, who holds them.

A slot is one concrete core or GPU (:mod:`course_lib.training.machine.capacity`), and its file is named after
it: ``cpu-003.lock`` for core 3, ``gpu-01.lock`` for GPU 1, in the shared folder (``$COURSE_SLOTS_DIR``,
default ``/tmp/course-slots``). It is held while some process holds an exclusive ``fcntl.flock`` on
it, and the holder's details (user, pid, script, workers, start, timeout) are written into it; the
operating system drops the lock when its last holder ends, however it ends. Queue tickets
(``queue/t-…``) are locked the same way, so a dead waiter's ticket is recognised and removed.

Two kinds of processes take these locks: the launcher (:mod:`course_lib.runner.slots`, which queues and
then hands each rank its share) and a training script started WITHOUT the launcher, which claims free
cores for itself (:func:`course_lib.training.machine.placement.worker_share`). Both name the same files, so
neither lands on a core or GPU the other holds. This module lives in the training layer because the
scripts use it.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_DIR", "Holder", "slots_dir", "lock_path", "holders", "open_lock", "try_lock", "write_holder",
           "live_tickets"]

DEFAULT_DIR = "/tmp/course-slots"


@dataclass
class Holder:
    """Who holds one slot (read from the slot file while it is locked)."""

    slot: int
    kind: str = "cpu"
    user: str = "?"
    pid: int = 0
    script: str = "?"
    workers: int = 0
    started: float = 0.0
    timeout_s: float | None = None

    def describe(self, now: float) -> str:
        """e.g. ``"alice (pid 4242, horovod_fmnist.py, 2 workers, running 35 s, core 3)"``."""
        where = f"GPU {self.slot}" if self.kind == "gpu" else f"core {self.slot}"
        return (f"{self.user} (pid {self.pid}, {self.script}, {self.workers} worker"
                f"{'s' if self.workers != 1 else ''}, running {max(0.0, now - self.started):.0f} s, {where})")


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


def lock_path(folder: Path, kind: str, resource: int) -> Path:
    """The file of one slot: ``cpu-003.lock`` (core 3) or ``gpu-01.lock`` (GPU 1)."""
    return folder / (f"gpu-{resource:02d}.lock" if kind == "gpu" else f"cpu-{resource:03d}.lock")


def write_holder(fd: int, info: dict) -> None:
    """Write the holder's details into a locked slot file (another user's read-only file: skipped)."""
    data = json.dumps(info).encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:  # another user's read-only file: the holder shows as "?"
        pass


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


def _read_holder(path: Path, slot: int, kind: str) -> Holder:
    """The holder written into a slot file (unknown fields stay "?")."""
    try:
        info = json.loads(path.read_text() or "{}")
        return Holder(slot=slot, kind=kind, **{k: info[k] for k in
                                    ("user", "pid", "script", "workers", "started", "timeout_s")
                                    if k in info})
    except (OSError, ValueError, TypeError):
        return Holder(slot=slot, kind=kind)


def holders(kind: str, resources: tuple[int, ...] | list[int],
            directory: Path | None = None) -> list[Holder]:
    """The slots among ``resources`` (core ids or GPU indices) that are held now, with their holders."""
    folder = directory or slots_dir()
    found = []
    for slot in resources:
        path = lock_path(folder, kind, slot)
        if not path.exists():
            continue
        fd = open_lock(path)
        try:
            if try_lock(fd):
                continue  # free (our probe lock is dropped by the close below)
            found.append(_read_holder(path, slot, kind))
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
