"""Launch ``horovodrun`` (or a single ``python``) from a notebook cell, live and leak-free.

``run_horovod`` builds the ``horovodrun`` command as an argument list, checks every input
before anything starts, streams the output of all ranks line by line while the run goes on
(rank 0 only, all ranks, or none; horovodrun's own lines are always shown), collects the JSON
lines of ``docs/architecture.md`` into a :class:`RunResult`, and on a crash, a timeout, a stop
request or a notebook interrupt ends every process of the run (see :mod:`course_lib.runner.processes`).
stderr is never hidden: each line is kept in the log and shown on the stream it was written to
(a rank's warnings and tracebacks on the notebook's stderr).

Slots are machine-wide and concrete (:mod:`course_lib.runner.slots`): a run holds one slot per
worker (a core, or a GPU) for its whole life, shared with every other launch on the machine, from
any kernel or user; a launch that does not fit waits in line with a message on stderr (or, with
``wait_for_slots=False``, raises :class:`SlotsBusyError` naming the holders). Each rank is started
through the rank wrapper (:mod:`course_lib.runner.place_rank`), which confines it to ITS granted
cores (or GPU) before the script starts, so concurrent runs and co-located "hosts" never share a
core; the script reads its share, and so its threads, from ``$COURSE_GRANT``
(:func:`course_lib.training.machine.placement.worker_share`). Every run is started under
:mod:`course_lib.runner.watchdog`, so it ends within seconds of its caller's death.

Stopping from another thread (the Stop button of :mod:`course_lib.lessons.horovod.widgets`): pass a
``threading.Event`` as ``stop_event`` and set it; the call then cleans up and raises
:class:`RunStoppedError`. Progress hooks: ``on_event(dict)`` is called for every JSON event.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import re
from typing import Sequence, Unpack

from course_lib.runner.execute import RunFailedError, RunStoppedError, RunTimeoutError, execute
from course_lib.runner.options import Launch, RunOptions
from course_lib.runner.preflight import (
    CONTROLLERS, LaunchError, check_hosts, check_mpirun, check_script, check_strings, find_horovodrun,
    horovod_launcher, hosts_are_local)
from course_lib.runner.runlog import RunResult
from course_lib.runner.slots import SlotsBusyError, parse_hosts, placed, plan_placement

__all__ = [
    "LaunchError", "SlotsBusyError", "RunFailedError", "RunTimeoutError", "RunStoppedError", "RunResult",
    "RunOptions", "find_horovodrun", "build_horovod_command", "run_horovod", "run_python",
]


def build_horovod_command(horovodrun: str | Sequence[str], num_workers: int, program: Sequence[str],
                          hosts: str | None, controller: str | None,
                          extra_horovodrun_args: Sequence[str]) -> list[str]:
    """The ``horovodrun`` argument list (no validation; see :func:`run_horovod`).

    Args:
        horovodrun: The launcher: a path, or an argument list such as :func:`horovod_launcher`'s.
        program: What each rank runs: ``[python, script, *args]``, behind the rank wrapper when the
            run is placed on this machine (:func:`course_lib.runner.slots.placed`).

    Returns:
        ``[horovodrun, -np, N, (--gloo|--mpi), (-H, hosts), *extra, *program]``.
    """
    command = [horovodrun] if isinstance(horovodrun, str) else list(horovodrun)
    command += ["-np", str(num_workers)]
    if controller is not None:
        command.append(f"--{controller}")
    if hosts is not None:
        command += ["-H", hosts]
    return command + list(extra_horovodrun_args) + list(program)


def run_horovod(script: str | os.PathLike[str], num_workers: int, script_args: Sequence[str] = (),
                *, hosts: str | None = None, controller: str | None = "gloo",
                extra_horovodrun_args: Sequence[str] = (), **options: Unpack[RunOptions]) -> RunResult:
    """Run ``horovodrun -np N [--gloo|--mpi] [-H hosts] [extra] python script args``, live.

    Args:
        script: The training script (any Horovod script; ours print JSON lines).
        num_workers: Number of Horovod processes (a positive int).
        script_args: Arguments of the script, each a ``str``.
        hosts: ``"host:slots[,host:slots...]"``; ``None``: this machine.
        controller: ``"gloo"``, ``"mpi"`` or ``None`` (horovodrun's own choice).
        extra_horovodrun_args: More ``horovodrun`` arguments, placed before the script.
        **options: The launchers' shared keywords (:class:`course_lib.runner.options.RunOptions`):
            ``timeout``, ``env``, ``show`` (default ``"rank0"``), ``output``, ``check``, ``python``,
            ``cwd``, ``stop_event``, ``on_event``, ``grace_s``, ``clock``, ``wait_for_slots``,
            ``device``, ``oversubscribe``.

    Returns:
        The :class:`RunResult` (log, JSON records, return code, duration, pids, placement).

    Raises:
        LaunchError: Bad input, missing horovodrun / mpirun, more workers than slots (without
            ``oversubscribe``) or than GPUs, before anything is launched.
        SlotsBusyError: The slots are held by other runs and ``wait_for_slots=False``.
        RunFailedError: Non-zero exit (with ``check``), naming the failing rank and its tail.
        RunTimeoutError: The timeout expired. RunStoppedError: ``stop_event`` was set.
        KeyboardInterrupt: Re-raised after every process of the run was ended.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise LaunchError(f"num_workers={num_workers!r} must be a positive int, e.g. 2")
    if controller not in CONTROLLERS:
        raise LaunchError(f"controller={controller!r} must be 'gloo', 'mpi' or None")
    run = Launch.of(options)
    path = check_script(script, run.cwd)
    args = check_strings("script_args", script_args)
    extra = check_strings("extra_horovodrun_args", extra_horovodrun_args)
    if hosts is not None:
        total = check_hosts(hosts)
        if num_workers > total:
            raise LaunchError(f"num_workers={num_workers} exceeds the {total} slots of "
                              f"hosts={hosts!r}; add slots (host:slots) or use fewer workers")
    place = plan_placement(num_workers, hosts=hosts, device=run.device, oversubscribe=run.oversubscribe)
    horovodrun = horovod_launcher(run.python, find_horovodrun(run.python))
    if controller == "mpi":
        check_mpirun(dict(os.environ) | dict(run.env or {}))
        # Open MPI busy-polls while a rank waits; on a CPU-only machine that steals the cores the
        # other ranks compute on (an epoch measured 25 s instead of 7 s). Yield instead, unless the
        # caller chose otherwise.
        run = run.but(env={"OMPI_MCA_mpi_yield_when_idle": "1", **dict(run.env or {})})
    command = build_horovod_command(horovodrun, num_workers, placed(place, [run.python, str(path), *args]),
                                    hosts, controller, extra)
    try:
        return execute(run.but(command=command, launcher="horovodrun", place=place, script=path.name))
    except RunFailedError as exc:
        if hosts is not None and not isinstance(exc, (RunTimeoutError, RunStoppedError)):
            exc.args = (name_failed_host(str(exc.args[0]), exc.rank, hosts, exc.result),) + exc.args[1:]
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


def run_python(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, slots: int = 1,
               **options: Unpack[RunOptions]) -> RunResult:
    """Run ``python script args`` in a fresh process, streamed and cleaned up like
    :func:`run_horovod` (e.g. a MirroredStrategy run, whose memory is freed at its end).

    Args:
        script, script_args: As in :func:`run_horovod`. All output lines count as rank 0 and are
            shown (``show`` is always ``"all"``).
        slots: Machine-wide slots the process holds, and runs on, while it runs: that many cores
            (or GPUs) of its own (0: none, unplaced; more than the machine has: all of them). A
            one-process baseline compared with N workers holds N, so both use the same cores.
        **options: As in :func:`run_horovod` (``oversubscribe`` is implied: one process may hold
            all the slots).

    Returns:
        The :class:`RunResult`.

    Raises:
        LaunchError, RunFailedError, RunTimeoutError, RunStoppedError, KeyboardInterrupt: As in
        :func:`run_horovod`.
    """
    if options.get("show", "all") != "all":
        raise LaunchError(f"show={options['show']!r}: run_python shows every line of its one process "
                          "(drop show=, or use output= to send the lines elsewhere)")
    run = Launch.of({**options, "show": "all"})
    path = check_script(script, run.cwd)
    args = check_strings("script_args", script_args)
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
        raise LaunchError(f"slots={slots!r} must be an int >= 0 (machine-wide slots to hold)")
    place = plan_placement(1, device=run.device, hold=slots, oversubscribe=True) if slots else None
    return execute(run.but(command=placed(place, [run.python, str(path)] + args), launcher="python", tagged=False,
                           place=place, script=path.name))
