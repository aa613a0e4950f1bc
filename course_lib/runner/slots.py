"""What a launch holds on this machine: one decision for every launcher, and machine-wide slots held fairly.

Every launcher asks :func:`plan_placement` before it starts anything. It answers with a
:class:`PlaceRequest` (which device, how many of the machine's slots to hold, how the ranks find their
share) or ``None`` for runs on other machines, and it raises :class:`LaunchError` for a run that does not
fit: more workers than slots without ``oversubscribe=True``, or two ranks on one GPU (NCCL refuses it).
The engine (:func:`course_lib.runner.run.execute`) then holds the slots (:func:`acquire`) and hands each rank its
share through the rank wrapper (:data:`RANK_WRAPPER`, :mod:`course_lib.runner.place_rank`).

A slot is one concrete CPU core or GPU (:func:`course_lib.training.machine.capacity.machine_capacity`, which
also applies ``$COURSE_SLOTS``), and its file is named after it (``cpu-003.lock``) in one shared folder,
``$COURSE_SLOTS_DIR`` (default ``/tmp/course-slots``; the files are :mod:`course_lib.training.machine.slot_files`).
A run holds a slot by holding an exclusive ``fcntl.flock`` on its file for its whole life, in the
launching process and in the run's watchdog (:mod:`course_lib.runner.procs.watchdog`). The operating system
drops a ``flock`` when the last process holding it ends, however it ends (SIGKILL included), so a crash
never leaves a stale lock. A :class:`SlotGrant` names the cores or GPUs it holds, so concurrent runs are
placed on disjoint ones (:mod:`course_lib.training.machine.placement`).

A launch that does not fit queues: it holds a ticket file (locked the same way, so the tickets of dead
waiters are ignored), and the oldest live ticket is served first, so a large request is not starved by
small ones. While it waits, a message says its position, who holds the slots (user, pid, script,
workers, for how long) and an estimate. With ``wait=False`` it raises :class:`SlotsBusyError` instead.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import fcntl
import getpass
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from course_lib.runner.preflight import LaunchError, capacity, hosts_are_local, parse_hosts
from course_lib.training.machine.hardware import gpu_count
from course_lib.training.machine.capacity import Capacity, device_for
from course_lib.training.machine.slot_files import (
    DEFAULT_DIR, Holder, holders, live_tickets, lock_path, open_lock, slots_dir, try_lock, write_holder)

__all__ = ["RANK_WRAPPER", "PlaceRequest", "plan_placement", "parse_hosts", "SlotsBusyError",
           "SlotWaitCancelled", "Holder", "SlotGrant", "slots_dir", "holders", "acquire", "DEFAULT_DIR"]

#: What the launchers put in front of each rank's program on this machine (the launcher's own Python,
#: which has course_lib, whatever interpreter the ranks use).
RANK_WRAPPER = (sys.executable, "-m", "course_lib.runner.place_rank")

@dataclass(frozen=True)
class PlaceRequest:
    """The slots a run holds on this machine and how its ranks share them.

    Attributes:
        capacity: The machine's slots of the run's device (:func:`course_lib.runner.preflight.capacity`).
        slots: How many to hold (an oversubscribed run holds them all).
        workers: The run's ranks (more ranks than slots wrap round them).
        hosts: ``(name, slots)`` of the run's host list, for Gloo's and elastic's rank slots.
        hide_gpus: CPU ranks on a GPU machine get ``CUDA_VISIBLE_DEVICES=""``.
    """

    capacity: Capacity
    slots: int
    workers: int
    hosts: tuple[tuple[str, int], ...] = ()
    hide_gpus: bool = False

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"gpu"``."""
        return self.capacity.kind


def plan_placement(workers: int, *, hosts: str | None = None, device: str | None = None,
                   oversubscribe: bool = False, hold: int | None = None) -> PlaceRequest | None:
    """Decide what a launch of ``workers`` ranks holds on this machine.

    Args:
        workers: Ranks of the run (for an elastic run, its most).
        hosts: The run's host list; hosts other than this machine: ``None`` is returned (the other
            machines' ranks place themselves, :func:`course_lib.training.machine.placement.worker_share`).
        device: ``"cpu"``, ``"gpu"`` (a ``WorkerPlan``'s) or ``None``: the device rule
            (:func:`course_lib.training.machine.capacity.device_for`: GPUs when the machine has one per worker,
            else CPU cores, the GPUs then hidden from the ranks).
        oversubscribe: Allow more workers than slots (CPU only; the run then holds every slot).
        hold: Slots to hold when it is not one per worker (``run_python(workers=...)``: one process on
            several cores or GPUs).

    Returns:
        The :class:`PlaceRequest`, or ``None`` for a run on other machines.

    Raises:
        LaunchError: It does not fit: more GPU ranks than GPUs, or more workers than slots without
            ``oversubscribe``; or a bad ``device`` / ``$COURSE_SLOTS``.
    """
    if not hosts_are_local(hosts):
        return None
    gpus = gpu_count()
    wanted = workers if hold is None else hold
    if device is None:  # the one device rule (machine/capacity.device_for)
        device = device_for(wanted, capacity("gpu").slots if gpus else 0)
    cap = capacity(device)
    if cap.kind == "gpu" and wanted > cap.slots:
        raise LaunchError(f"{wanted} GPU workers but this machine has {cap.describe()}: NCCL refuses two "
                          "ranks on one GPU (horovod#3929), so the course never places them so; use "
                          "fewer workers, or a plan on CPU cores (plan_workers(gpus=0)) to run them as "
                          "CPU processes")
    if wanted > cap.slots and not oversubscribe:
        raise LaunchError(
            f"workers={wanted} exceeds the {cap.slots} slots of this machine ({cap.describe()}); "
            "pass oversubscribe=True in the worker plan (workers=plan.with_workers(n, oversubscribe=True)) to run "
            "more processes than slots (they then share cores, so timings are not representative)")
    return PlaceRequest(cap, min(wanted, cap.slots), workers, parse_hosts(hosts, workers),
                        hide_gpus=cap.kind == "cpu" and gpus > 0)


class SlotsBusyError(LaunchError):
    """The slots asked for are held by other runs and the caller asked not to wait."""


class SlotWaitCancelled(RuntimeError):
    """A launch waiting for slots was stopped (its ``stop_event`` was set)."""


@dataclass
class SlotGrant:
    """Slots held by this process until :meth:`release` (also a context manager).

    Attributes:
        kind: ``"cpu"`` or ``"gpu"``. slots: The core ids or GPU indices held. fds: Their locked file
        descriptors (pass them to the watchdog, which keeps them locked until the run's processes are
        gone). total: Slots of the machine. waited_s: Seconds spent in the queue.
    """

    kind: str
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


def _take(count: int, capacity: Capacity, folder: Path, info: dict) -> tuple[list[int], list[int]]:
    """Lock ``count`` free slots (all or none), the lowest free ids first; write ``info`` into each."""
    slots: list[int] = []
    fds: list[int] = []
    for slot in capacity.ids:
        if len(slots) == count:
            break
        fd = open_lock(lock_path(folder, capacity.kind, slot))
        if try_lock(fd):
            slots.append(slot)
            fds.append(fd)
        else:
            os.close(fd)
    if len(slots) < count:
        for fd in fds:
            os.close(fd)
        return [], []
    for fd in fds:
        write_holder(fd, info)
    return slots, fds


def _estimate(found: list[Holder], now: float) -> str:
    bounds = [h.started + h.timeout_s - now for h in found if h.timeout_s]
    if found and len(bounds) == len(found):
        return f"a slot frees within {max(0.0, min(bounds)):.0f} s at the latest (the holders' timeouts)"
    return "no upper bound (a holder set no timeout); runs of this course take minutes"


def acquire(request: PlaceRequest, *, script: str = "?", timeout_s: float | None = None, wait: bool = True,
            stop_event: threading.Event | None = None, notify: Callable[[str], None] = print,
            poll_s: float = 0.5, directory: Path | None = None) -> SlotGrant:
    """Hold the ``request.slots`` slots of ``request.capacity``, waiting in line if they are taken.

    Args:
        request: What the launch holds (:func:`plan_placement`): ``slots`` of ``capacity``, for ``workers`` ranks.
        script, timeout_s: What the waiting messages of other launches show about this run.
        wait: ``False``: raise :class:`SlotsBusyError` instead of waiting.
        stop_event: When set, waiting ends with :class:`SlotWaitCancelled`.
        notify: Called with each waiting message (when the position or the holders change).
        poll_s: Seconds between two looks at the slots. directory: Default :func:`slots_dir`.

    Returns:
        The :class:`SlotGrant` (release it, or use it as a context manager).

    Raises:
        LaunchError: ``request.slots`` outside 1..slots. SlotsBusyError: Busy and ``wait=False``.
        SlotWaitCancelled: ``stop_event`` was set while waiting.
    """
    count, capacity = request.slots, request.capacity
    total = capacity.slots
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= total:
        raise LaunchError(f"cannot hold {count!r} of the machine's {total} slots")
    folder = directory or slots_dir()
    info = {"user": getpass.getuser(), "pid": os.getpid(), "script": script,
            "workers": request.workers, "started": time.time(), "timeout_s": timeout_s}
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
                    slots, fds = _take(count, capacity, folder, info)
                    if slots:
                        return SlotGrant(capacity.kind, slots, fds, total, time.monotonic() - started)
                found = holders(capacity.kind, capacity.ids, folder)
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
