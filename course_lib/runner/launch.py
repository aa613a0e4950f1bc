"""Launch ``horovodrun`` (or a single ``python``) from a notebook cell, live and leak-free.

``run_horovod(script, script_args, workers=plan)`` builds the ``horovodrun`` command as an argument list,
checks every input before anything starts, streams the output of all ranks line by line while the run
goes on (rank 0 only, all ranks, or none; horovodrun's own lines are always shown), collects the JSON
lines of ``docs/architecture.md`` into a :class:`RunResult`, and on a crash, a timeout, a stop request or a
notebook interrupt ends every process of the run. stderr is never hidden: each line is kept in the log
and shown on the stream it was written to (a rank's warnings and tracebacks on the notebook's stderr).

Every public launcher of the course has this one signature: ``run_<launcher>(script, script_args=(), *,
workers=WorkerPlan | int, <the shared options>, <at most one option of its own>)``; the shared options are
:class:`course_lib.runner.run.RunOptions`, and the one engine under all of them is
:func:`course_lib.runner.run.run` (slots held machine-wide, each rank on its granted cores or GPU, every run
under the watchdog, so it ends within seconds of its caller's death).

Stopping from another thread (the Stop button of :mod:`course_lib.lessons.horovod.widgets`): pass a
``threading.Event`` as ``stop_event`` and set it; the call then cleans up and raises
:class:`RunStoppedError`. Progress hooks: ``on_event(dict)`` is called for every JSON event.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from course_lib.runner import launchers
from course_lib.runner.launchers import Horovodrun, build_horovod_command
from course_lib.runner.preflight import find_horovodrun, horovod_launcher, hosts_are_local, parse_hosts
from course_lib.runner.run import (
    LaunchError, RunFailedError, RunOptions, RunResult, RunStoppedError, RunTimeoutError, SlotsBusyError, run, shared)
from course_lib.training.machine.capacity import WorkerPlan

__all__ = [
    "LaunchError", "SlotsBusyError", "RunFailedError", "RunTimeoutError", "RunStoppedError", "RunResult",
    "RunOptions", "Horovodrun", "WorkerPlan", "find_horovodrun", "horovod_launcher", "build_horovod_command",
    "run_horovod", "run_python",
]


def run_horovod(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, workers: WorkerPlan | int = 1,
                timeout: float | None = None, env: Mapping[str, str] | None = None, show: str = "rank0",
                output: Any = None, check: bool = True, python: str = sys.executable,
                cwd: str | os.PathLike[str] | None = None, stop_event: threading.Event | None = None,
                on_event: Callable[[dict], None] | None = None, grace_s: Sequence[float] = (3.0, 3.0),
                clock: Callable[[], float] = time.monotonic, wait_for_slots: bool = True,
                horovodrun: Horovodrun | None = None) -> RunResult:
    """Run ``horovodrun -np N [--gloo|--mpi] [-H hosts] [extra] python script args``, live.

    Args:
        script: The training script (any Horovod script; ours print JSON lines).
        script_args: Arguments of the script, each a ``str``.
        workers: A ``WorkerPlan`` (``plan_workers()``: its workers, device and oversubscribing; a
            baseline: ``plan.with_workers(1)``) or a number of processes (the device rule picks the device).
        timeout, env, show, output, check, python, cwd, stop_event, on_event, grace_s, clock, wait_for_slots:
            The launchers' shared options (:class:`course_lib.runner.run.RunOptions`).
        horovodrun: Its own options (:class:`Horovodrun`: ``hosts``, ``controller`` (default ``"gloo"``),
            ``extra_args``).

    Returns:
        The :class:`RunResult` (log, JSON records, return code, duration, pids, placement).

    Raises:
        LaunchError: Bad input, missing horovodrun / mpirun, more workers than slots (without the plan's
            ``oversubscribe``) or than GPUs, before anything is launched.
        SlotsBusyError: The slots are held by other runs and ``wait_for_slots=False``.
        RunFailedError: Non-zero exit (with ``check``), naming the failing rank and its tail.
        RunTimeoutError: The timeout expired. RunStoppedError: ``stop_event`` was set.
        KeyboardInterrupt: Re-raised after every process of the run was ended.
    """
    options = horovodrun or Horovodrun()
    launcher = launchers.horovodrun(options)
    try:
        return run(launcher, script, script_args, workers, shared(locals()))
    except RunFailedError as exc:
        if options.hosts is not None and not isinstance(exc, (RunTimeoutError, RunStoppedError)):
            exc.args = (name_failed_host(str(exc.args[0]), exc.rank, options.hosts, exc.result),) + exc.args[1:]
        raise


#: horovodrun's (Gloo) report of a rank's exit status.
_EXIT_STATUS = re.compile(r"Process (\d+) exit with status code (\d+)")


def name_failed_host(message: str, rank: int | None, hosts: str, result: RunResult | None) -> str:
    """``message`` with the failed rank's host named: ``rank 1 (on hostB) failed``.

    A fixed-size run places its ranks on the hosts of ``hosts`` in order (``a:2,b:1``: ranks 0 and 1 on
    ``a``, rank 2 on ``b``). A remote rank that exited with status 255 is ssh's report that its
    connection to the host failed (the host went down, or its network did), and the message says so.
    """
    if rank is None:
        return message
    order = [name for name, slots in parse_hosts(hosts, 0) for _ in range(slots)]
    if rank >= len(order):
        return message
    host = order[rank]
    message = message.replace(f"rank {rank} failed", f"rank {rank} (on {host}) failed", 1)
    statuses = {int(r): int(code) for r, code in _EXIT_STATUS.findall("\n".join(result.log if result else []))}
    if statuses.get(rank) == 255 and not hosts_are_local(f"{host}:1"):
        message += (f"\nrank {rank} exited with status 255, ssh's own status for a lost connection: "
                    f"{host} went down or became unreachable (check it with `ssh {host} true`).")
    return message


def run_python(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, workers: WorkerPlan | int = 1,
               timeout: float | None = None, env: Mapping[str, str] | None = None, show: str = "all",
               output: Any = None, check: bool = True, python: str = sys.executable,
               cwd: str | os.PathLike[str] | None = None, stop_event: threading.Event | None = None,
               on_event: Callable[[dict], None] | None = None, grace_s: Sequence[float] = (3.0, 3.0),
               clock: Callable[[], float] = time.monotonic, wait_for_slots: bool = True) -> RunResult:
    """Run ``python script args`` in a fresh process, streamed and cleaned up like
    :func:`run_horovod` (e.g. a MirroredStrategy run, whose memory is freed at its end).

    Args:
        script, script_args: As in :func:`run_horovod`. All output lines count as rank 0 and are
            shown (``show`` is always ``"all"``).
        workers: The machine-wide slots the one process holds, and runs on, while it runs: a ``WorkerPlan``
            (its workers, on its device: a one-process baseline compared with N workers holds N, so both use
            the same cores) or a count (0: none, unplaced). More than the machine has: all of them.
        timeout, env, show, output, check, python, cwd, stop_event, on_event, grace_s, clock, wait_for_slots:
            As in :func:`run_horovod`.

    Returns:
        The :class:`RunResult`.

    Raises:
        LaunchError, RunFailedError, RunTimeoutError, RunStoppedError, KeyboardInterrupt: As in
        :func:`run_horovod`.
    """
    if show != "all":
        raise LaunchError(f"show={show!r}: run_python shows every line of its one process "
                          "(drop show=, or use output= to send the lines elsewhere)")
    return run(launchers.python(), script, script_args, workers, shared(locals()))
