"""Fault drills for multi-worker runs: kill one worker mid-epoch, read the group's sizes.

:class:`WorkerKiller` is an ``on_event`` hook for :mod:`course_lib.runner.multiworker` (and
:mod:`course_lib.runner.launch`): it learns each worker's pid from the ``worker`` events the
course's multi-worker scripts print, and kills one of them with SIGKILL partway into an epoch,
as a crashed machine would. :func:`world_sizes` reads the sizes an elastic group went through.

Introduced in notebooks/06_beyond_one_machine.ipynb.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from course_lib.runner.runlog import RunResult

__all__ = ["WorkerKiller", "world_sizes"]


class WorkerKiller:
    """``on_event`` hook: SIGKILL worker ``rank`` partway into the epoch after ``after_epoch``.

    It learns each worker's pid from the ``worker`` events (every rank prints one when a group
    forms) and, once rank 0 reports epoch ``after_epoch``, kills that pid ``fraction`` of that
    epoch's duration later — ``fraction`` of the way into the next epoch when both take as long.
    The first epoch is not such a clock: it also traces the graph (2-5 times longer on a CPU), so
    ``after_epoch=1`` can land one epoch later; time the kill from a later epoch when it must land
    in a given one. It fires once.

    Attributes:
        killed_pid: The pid killed (None until then). killed_at: ``time.monotonic()`` of the kill.
    """

    def __init__(self, rank: int = 1, after_epoch: int = 1, fraction: float = 0.5) -> None:
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"fraction={fraction!r} must be in [0, 1): a part of one epoch")
        self.rank, self.after_epoch, self.fraction = rank, after_epoch, fraction
        self.pids: dict[int, int] = {}
        self.killed_pid: int | None = None
        self.killed_at: float | None = None
        self._armed = True

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "worker":
            self.pids[int(event["rank"])] = int(event["pid"])
        elif kind == "epoch" and self._armed and event.get("epoch") == self.after_epoch:
            pid = self.pids.get(self.rank)
            if pid is None:
                return
            self._armed = False
            delay = self.fraction * float(event.get("epoch_time_s") or 0.0)
            timer = threading.Timer(delay, self._kill, args=(pid,))
            timer.daemon = True
            timer.start()

    def _kill(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.killed_pid, self.killed_at = pid, time.monotonic()


def world_sizes(result: RunResult) -> list[int]:
    """The sizes an elastic group went through, in order (from the ``worker`` event of each group's rank 0).

    The event's own rank, not the line's prefix: the prefix is the process's launch slot, and after a reset
    Horovod may number another process 0.
    """
    sizes: list[int] = []
    for _, event in result.events:
        if event["event"] == "worker" and int(event["rank"]) == 0:
            size = int(event["size"])
            if not sizes or sizes[-1] != size:
                sizes.append(size)
    return sizes
