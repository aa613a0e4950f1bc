"""Launch ``horovodrun`` (or a single ``python``) from a notebook cell, live and leak-free.

``run_horovod`` builds the ``horovodrun`` command as an argument list, checks every input
before anything starts, streams the output of all ranks line by line while the run goes on
(rank 0 only, all ranks, or none; horovodrun's own lines are always shown), collects the JSON
lines of ``docs/architecture.md`` into a :class:`RunResult`, and on a crash, a timeout, a stop
request or a notebook interrupt ends every process of the run (see :mod:`course_lib.runner.processes`).
stderr is never hidden: each line is kept in the log and shown on the stream it was written to
(a rank's warnings and tracebacks on the notebook's stderr).

Slots are machine-wide (:mod:`course_lib.runner.slots`): a run holds one slot per worker (a
core, or a GPU) for its whole life, shared with every other launch on the machine, from any
kernel or user; a launch that does not fit waits in line with a message on stderr (or, with
``wait_for_slots=False``, raises :class:`SlotsBusyError` naming the holders), and on a CPU-only
machine each worker gets the threads its slots pay for (``--threads-per-worker``). Every run is
started under :mod:`course_lib.runner.watchdog`, so it ends within seconds of its caller's death.

Stopping from another thread (the Stop button of :mod:`course_lib.lessons.widgets`): pass a
``threading.Event`` as ``stop_event`` and set it; the call then cleans up and raises
:class:`RunStoppedError`. Progress hooks: ``on_event(dict)`` is called for every JSON event.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from course_lib.runner.execute import RunFailedError, RunStoppedError, RunTimeoutError, execute
from course_lib.runner.preflight import (
    CONTROLLERS, LaunchError, available_slots, check_common, check_env, check_hosts, check_mpirun,
    check_script, check_strings, find_horovodrun, gpu_count)
from course_lib.runner.runlog import RunResult
from course_lib.runner.slots import SlotsBusyError, total_slots

__all__ = [
    "LaunchError", "SlotsBusyError", "RunFailedError", "RunTimeoutError", "RunStoppedError", "RunResult",
    "available_slots", "find_horovodrun", "build_horovod_command", "run_horovod", "run_python",
]

_LOCAL_HOSTS = ("localhost", "127.0.0.1")
_THREADS_FLAG = "--threads-per-worker"


def build_horovod_command(horovodrun: str, num_workers: int, python: str, script: Path,
                          script_args: Sequence[str], hosts: str | None, controller: str | None,
                          extra_horovodrun_args: Sequence[str]) -> list[str]:
    """The ``horovodrun`` argument list (no validation; see :func:`run_horovod`).

    Returns:
        ``[horovodrun, -np, N, (--gloo|--mpi), (-H, hosts), *extra, python, script, *args]``.
    """
    command = [horovodrun, "-np", str(num_workers)]
    if controller is not None:
        command.append(f"--{controller}")
    if hosts is not None:
        command += ["-H", hosts]
    return command + list(extra_horovodrun_args) + [python, str(script)] + list(script_args)


def run_horovod(script: str | os.PathLike[str], num_workers: int, script_args: Sequence[str] = (),
                *, hosts: str | None = None, controller: str | None = "gloo",
                timeout: float | None = None, env: Mapping[str, str] | None = None,
                extra_horovodrun_args: Sequence[str] = (), oversubscribe: bool = False,
                show: str = "rank0", output: Any = None, check: bool = True,
                python: str = sys.executable, cwd: str | os.PathLike[str] | None = None,
                stop_event: threading.Event | None = None,
                on_event: Callable[[dict], None] | None = None,
                grace_s: Sequence[float] = (3.0, 3.0),
                clock: Callable[[], float] = time.monotonic,
                wait_for_slots: bool = True) -> RunResult:
    """Run ``horovodrun -np N [--gloo|--mpi] [-H hosts] [extra] python script args``, live.

    Args:
        script: The training script (any Horovod script; ours print JSON lines).
        num_workers: Number of Horovod processes (a positive int).
        script_args: Arguments of the script, each a ``str``.
        hosts: ``"host:slots[,host:slots...]"``; ``None``: this machine.
        controller: ``"gloo"``, ``"mpi"`` or ``None`` (horovodrun's own choice).
        timeout: Seconds before the run is ended; ``None``: no limit (waiting for slots does
            not count).
        env: Extra environment variables for the run (added to the current environment), each
            name and value a ``str``.
        extra_horovodrun_args: More ``horovodrun`` arguments, placed before the script.
        oversubscribe: Allow more workers than the machine's slots (the run then holds them all).
        show: Output shown while it runs: ``"rank0"``, ``"all"`` (with rank prefixes) or
            ``"none"``; horovodrun's own lines are always shown.
        output: ``None`` (print), an ``ipywidgets.Output``, or a callable taking one line.
        check: Raise :class:`RunFailedError` on a non-zero exit status.
        python: Interpreter of the ranks. cwd: Working directory of the run.
        stop_event: Set it from another thread to end the run (raises :class:`RunStoppedError`).
        on_event: Called with every JSON event dict as soon as its line arrives.
        grace_s: Seconds granted after SIGINT and after SIGTERM when ending a run.
        clock: Monotonic clock for ``timeout`` and ``duration_s`` (injectable for tests).
        wait_for_slots: When other runs on this machine hold the slots needed: ``True`` waits
            in line (a message on stderr says the position, the holders and an estimate),
            ``False`` raises :class:`SlotsBusyError` naming them.

    Returns:
        The :class:`RunResult` (log, JSON records, return code, duration, pids).

    Raises:
        LaunchError: Bad input or missing horovodrun / mpirun, before anything is launched.
        SlotsBusyError: The slots are held by other runs and ``wait_for_slots=False``.
        RunFailedError: Non-zero exit (with ``check``), naming the failing rank and its tail.
        RunTimeoutError: The timeout expired. RunStoppedError: ``stop_event`` was set.
        KeyboardInterrupt: Re-raised after every process of the run was ended.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise LaunchError(f"num_workers={num_workers!r} must be a positive int, e.g. 2")
    if controller not in CONTROLLERS:
        raise LaunchError(f"controller={controller!r} must be 'gloo', 'mpi' or None")
    exe = check_common(timeout, show, output, python)
    env = check_env(env)
    path = check_script(script, cwd)
    args = check_strings("script_args", script_args)
    extra = check_strings("extra_horovodrun_args", extra_horovodrun_args)
    local = True
    if hosts is not None:
        total = check_hosts(hosts)
        if num_workers > total:
            raise LaunchError(f"num_workers={num_workers} exceeds the {total} slots of "
                              f"hosts={hosts!r}; add slots (host:slots) or use fewer workers")
        names = {part.strip().partition(":")[0] for part in hosts.split(",")}
        local = names <= set(_LOCAL_HOSTS) | {socket.gethostname()}
    machine_slots = total_slots(available_slots())
    if local and num_workers > machine_slots and not oversubscribe:
        raise LaunchError(
            f"num_workers={num_workers} exceeds the {machine_slots} slots of this machine "
            f"({'GPUs' if gpu_count() else 'CPU cores'}); pass oversubscribe=True to run more "
            "processes than slots (they then share cores, so timings are not representative)")
    horovodrun = find_horovodrun(exe)
    if controller == "mpi":
        check_mpirun(dict(os.environ) | dict(env or {}))
        # Open MPI busy-polls while a rank waits; on a CPU-only machine that steals the cores the
        # other ranks compute on (an epoch measured 25 s instead of 7 s). Yield instead, unless the
        # caller chose otherwise.
        env = {"OMPI_MCA_mpi_yield_when_idle": "1", **dict(env or {})}
    granted = min(num_workers, machine_slots) if local else 0
    if granted and not gpu_count():
        # Threads per worker follow the grant (one core per slot), unless the caller chose.
        threads = max(1, granted // num_workers)
        env = {"COURSE_THREADS_PER_WORKER": str(threads), **dict(env or {})}
        if _accepts_threads_flag(path) and not any(
                a == _THREADS_FLAG or a.startswith(_THREADS_FLAG + "=") for a in args):
            args = args + [_THREADS_FLAG, str(threads)]
    command = build_horovod_command(horovodrun, num_workers, exe, path, args, hosts, controller,
                                    extra)
    return execute(command, horovod=True, show=show, output=output, env=env, cwd=cwd,
                   timeout=timeout, check=check, stop_event=stop_event, on_event=on_event,
                   grace_s=grace_s, clock=clock, slots=granted, total_slots=machine_slots,
                   wait_for_slots=wait_for_slots, script=path.name, workers=num_workers)


def _accepts_threads_flag(script: Path) -> bool:
    """Whether ``script`` defines ``--threads-per-worker`` (the course's Horovod scripts do)."""
    try:
        return _THREADS_FLAG in script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def run_python(script: str | os.PathLike[str], script_args: Sequence[str] = (), *,
               timeout: float | None = None, env: Mapping[str, str] | None = None,
               output: Any = None, check: bool = True, python: str = sys.executable,
               cwd: str | os.PathLike[str] | None = None,
               stop_event: threading.Event | None = None,
               on_event: Callable[[dict], None] | None = None,
               grace_s: Sequence[float] = (3.0, 3.0),
               clock: Callable[[], float] = time.monotonic, slots: int = 1,
               wait_for_slots: bool = True) -> RunResult:
    """Run ``python script args`` in a fresh process, streamed and cleaned up like
    :func:`run_horovod` (e.g. a MirroredStrategy run, whose memory is freed at its end).

    Args:
        script, script_args, timeout, env, output, check, python, cwd, stop_event, on_event,
        grace_s, clock, wait_for_slots: As in :func:`run_horovod`. All output lines count as
        rank 0.
        slots: Machine-wide slots the process holds while it runs (0: none; more than the
            machine has: all of them).

    Returns:
        The :class:`RunResult`.

    Raises:
        LaunchError, RunFailedError, RunTimeoutError, RunStoppedError, KeyboardInterrupt: As in
        :func:`run_horovod`.
    """
    exe = check_common(timeout, "all", output, python)
    env = check_env(env)
    path = check_script(script, cwd)
    args = check_strings("script_args", script_args)
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
        raise LaunchError(f"slots={slots!r} must be an int >= 0 (machine-wide slots to hold)")
    machine_slots = total_slots(available_slots())
    return execute([exe, str(path)] + args, horovod=False, show="all", output=output, env=env,
                   cwd=cwd, timeout=timeout, check=check, stop_event=stop_event,
                   on_event=on_event, grace_s=grace_s, clock=clock,
                   slots=min(slots, machine_slots), total_slots=machine_slots,
                   wait_for_slots=wait_for_slots, script=path.name, workers=1)
