"""Run one command for the launcher: hold its machine-wide slots, stream it, collect, clean up.

This is the glue shared by every launcher (:mod:`course_lib.runner.launch`'s ``run_horovod`` and
``run_python``, :mod:`course_lib.runner.multiworker`'s elastic, ``mpirun`` and multi-process runs):
``execute`` holds the run's slots (:mod:`course_lib.runner.slots`), hands each rank its share of them
(a :class:`~course_lib.runner.slots.PlaceRequest` becomes ``$COURSE_PLACEMENT``, read by the rank
wrapper :mod:`course_lib.runner.place_rank` that the launchers put in front of every rank; what to hold
is decided by :func:`course_lib.runner.slots.plan_placement`), streams every line through
:func:`course_lib.runner.processes.stream_command` under the watchdog, shows each line on the stream
it was written to (with or without rank prefixes), collects the JSON lines into a
:class:`RunResult`, and turns a non-zero exit, a timeout or a stop request into one of the errors
below, each naming the run's launcher and carrying the failing rank's last lines. The launch travels
as one value, :class:`course_lib.runner.options.Launch`.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, Sequence

from course_lib.runner import processes, slots
from course_lib.runner.options import Launch
from course_lib.runner.runlog import RunResult, TagJoiner, names_stream, parse_line, split_interleaved
from course_lib.training.machine.placement import PLACEMENT_ENV, Placement, cut_shares

__all__ = ["RunFailedError", "RunTimeoutError", "RunStoppedError", "execute", "make_printer"]


TAIL_LINES = 15


class RunFailedError(RuntimeError):
    """A run ended with a non-zero status (or was ended by the launcher).

    Attributes:
        returncode: Exit status of ``horovodrun`` / ``python``.
        rank: The rank that failed first, when it can be told; else ``None``.
        tail: The last lines of that rank's output (or of the whole log).
        result: The :class:`RunResult` with everything collected up to the end.
    """

    def __init__(self, message: str, *, returncode: int | None, rank: int | None, tail: str,
                 result: RunResult | None) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.rank = rank
        self.tail = tail
        self.result = result


class RunTimeoutError(RunFailedError):
    """The run exceeded its ``timeout`` and all its processes were ended."""


class RunStoppedError(RunFailedError):
    """The run was stopped on request (``stop_event`` set) and all its processes were ended."""


def make_printer(output: Any) -> Callable[[str, str], None]:
    """A ``printer(line, stream)`` that shows stderr lines on stderr (a notebook shows them in red)."""
    if output is None:
        return lambda line, stream: print(line, flush=True,
                                          file=sys.stderr if stream == "stderr" else sys.stdout)
    if hasattr(output, "append_stdout"):
        return lambda line, stream: (output.append_stderr if stream == "stderr"
                                     else output.append_stdout)(line + "\n")
    return lambda line, stream: output(line)


def execute(launch: Launch) -> RunResult:
    """Hold what ``launch`` holds and hand it out, then stream its command under a watchdog.

    The inputs are not checked here: the public launchers check them first (they call this once
    everything is known to be valid).

    Args:
        launch: The launch (:class:`course_lib.runner.options.Launch`): its command, its launcher's
            name, what it holds (``place``), and the checked shared options (output, environment,
            time-out, stop event, clean-up grace, ...).

    Returns:
        The :class:`RunResult`.

    Raises:
        RunFailedError: Non-zero exit (with ``check``). RunTimeoutError: ``timeout`` expired.
        RunStoppedError: ``stop_event`` was set (also while waiting for slots). Each names the launcher.
    """
    env = dict(os.environ)
    env.update(launch.env or {})
    env.setdefault("PYTHONUNBUFFERED", "1")  # otherwise lines arrive only at exit
    result = RunResult(command=list(launch.command))
    printer = make_printer(launch.output)
    place, grant = launch.place, None
    if place is not None and place.slots:
        try:
            grant = slots.acquire(place, script=launch.script, timeout_s=launch.timeout,
                                  wait=launch.wait_for_slots, stop_event=launch.stop_event,
                                  notify=lambda message: printer(message, "stderr"))
        except slots.SlotWaitCancelled:
            raise RunStoppedError(f"{launch.launcher} run was stopped while it waited for slots (nothing "
                                  "was launched)", returncode=None, rank=None, tail="", result=result) from None
        try:
            shares = cut_shares(grant.kind, grant.slots, max(1, place.workers))
        except BaseException:
            grant.release()
            raise
        env[PLACEMENT_ENV] = Placement(shares, place.hosts, place.hide_gpus).to_env()
        result.placement = [list(share.cpus or share.gpus) for share in shares]
    else:
        env.pop(PLACEMENT_ENV, None)
    try:
        return _stream(launch, env, grant.fds if grant else (), result, printer)
    finally:
        if grant is not None:
            grant.release()


def _stream(launch: Launch, env: dict[str, str], hold_fds: Sequence[int], result: RunResult,
            printer: Callable[[str, str], None]) -> RunResult:
    """Stream ``launch.command`` (environment ``env``, slot locks ``hold_fds``), fill ``result``, and raise
    on a timeout, a stop or a failure."""
    tagged, show = launch.tagged, launch.show
    joiners = {"stdout": TagJoiner(), "stderr": TagJoiner()}
    lock = threading.Lock()

    def on_line(line: str, pipe: str) -> None:
        with lock:
            for joined in joiners.setdefault(pipe, TagJoiner()).feed(line) if tagged else [line]:
                for piece in split_interleaved(joined) if tagged else [joined]:
                    on_piece(piece, pipe)

    def on_piece(line: str, pipe: str) -> None:
        rank, stream, text, event = parse_line(line, horovod=tagged)
        if pipe == "stderr" and (rank is None or not tagged or not names_stream(line)):
            stream = "stderr"  # an unprefixed line's stream is the pipe it came through
        result.add_line(line, rank, stream, text, event)
        if show == "all" or rank is None or (show == "rank0" and rank == 0):
            printer(line if show == "all" else text, stream)
        if event is not None and launch.on_event is not None:
            launch.on_event(event)

    outcome = processes.stream_command(launch, on_line, env=env, hold_fds=hold_fds)
    for pipe, joiner in joiners.items():
        for piece in joiner.flush():
            on_piece(piece, pipe)
    result.returncode = outcome.returncode
    result.duration_s = outcome.duration_s
    result.pids = outcome.pids
    what = launch.launcher
    if outcome.reason == "timeout":
        rank, tail = result.failure_tail(TAIL_LINES)
        raise RunTimeoutError(
            f"{what} run exceeded timeout={launch.timeout} s and was ended (no process of it is left); "
            f"raise timeout= or shorten the run. Last lines:\n{tail}",
            returncode=outcome.returncode, rank=None, tail=tail, result=result)
    if outcome.reason == "stopped":
        rank, tail = result.failure_tail(TAIL_LINES)
        raise RunStoppedError(f"{what} run was stopped on request (no process of it is left)",
                              returncode=outcome.returncode, rank=None, tail=tail, result=result)
    if launch.check and outcome.returncode != 0:
        rank, tail = result.failure_tail(TAIL_LINES)
        if not tagged:
            rank, who, source = None, "", "its output"
        elif rank is None:
            who, source = " (no rank could be blamed)", "the log"
        else:
            who, source = f": rank {rank} failed", f"rank {rank}"
        raise RunFailedError(
            f"{what} exited with status {outcome.returncode}{who}. Last lines of {source}:\n{tail}",
            returncode=outcome.returncode, rank=rank, tail=tail, result=result)
    return result
