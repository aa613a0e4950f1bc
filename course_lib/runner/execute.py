"""Run one command for the launcher: hold its machine-wide slots, stream it, collect, clean up.

This is the glue shared by every launcher (:mod:`course_lib.runner.launch`'s ``run_horovod`` and
``run_python``, :mod:`course_lib.runner.multiworker`'s elastic, ``mpirun`` and multi-process runs):
``execute`` holds the run's slots (:mod:`course_lib.runner.slots`), hands each rank its share of them
(a :class:`PlaceRequest` becomes ``$COURSE_PLACEMENT``, read by the rank wrapper
:mod:`course_lib.runner.place_rank` that the launchers put in front of every rank; what to hold is
decided by :func:`course_lib.runner.placing.plan_placement`), streams every line through
:func:`course_lib.runner.processes.stream_command` under the watchdog, shows each line on the stream
it was written to (with or without rank prefixes), collects the JSON lines into a
:class:`RunResult`, and turns a non-zero exit, a timeout or a stop request into one of the errors
below, each carrying the failing rank's last lines.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Any, Callable, Sequence

from course_lib.runner import processes, slots
from course_lib.runner.options import Launch
from course_lib.runner.placing import PlaceRequest
from course_lib.runner.runlog import RunResult, names_stream, parse_line, split_interleaved
from course_lib.training.machine.placement import PLACEMENT_ENV, Placement, cut_shares

__all__ = ["RunFailedError", "RunTimeoutError", "RunStoppedError", "TagJoiner", "execute", "make_printer"]


TAIL_LINES = 15
#: Open MPI's ``--tag-output`` prefix, ``[jobid,rank]<stdout>:``.
_MPI_TAG = re.compile(r"\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:")


class TagJoiner:
    """Re-joins the lines that ``mpirun --tag-output`` cut apart.

    An unbuffered Python rank (``PYTHONUNBUFFERED=1``) writes ``print(text)`` as two writes, the
    text and then the newline; mpirun tags each piece it reads, so another rank's line can land
    between them: ``[1,0]<stdout>:AAA[1,1]<stdout>:BBB`` and later ``[1,0]<stdout>:`` (the newline).
    A tagged piece that is followed by another tag on the same line is unfinished: it is kept and
    put in front of that rank's next piece. Lines with one tag at their start pass unchanged.

    Introduced in notebooks/06_beyond_one_machine.ipynb.
    """

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}

    def feed(self, line: str) -> list[str]:
        """The complete lines that ``line`` finishes (none, one or several)."""
        tags = list(_MPI_TAG.finditer(line))
        if not tags or (len(tags) == 1 and tags[0].start() == 0 and not self.pending):
            return [line]
        out = [line[:tags[0].start()]] if tags[0].start() > 0 else []
        for k, match in enumerate(tags):
            tag = match.group()
            if k + 1 < len(tags):  # unfinished: another rank's piece follows on this line
                self.pending[tag] = self.pending.get(tag, "") + line[match.end():tags[k + 1].start()]
            else:
                out.append(tag + self.pending.pop(tag, "") + line[match.end():])
        return out

    def flush(self) -> list[str]:
        """What is still unfinished when the output ends, one line per rank."""
        rest = [tag + text for tag, text in self.pending.items()]
        self.pending.clear()
        return rest




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


def execute(command: list[str], launch: Launch, *, horovod: bool, place: PlaceRequest | None = None,
            script: str = "?", workers: int = 0) -> RunResult:
    """Hold the slots of ``place`` (``None``: none) and hand them out, then stream ``command`` under a watchdog.

    The inputs are not checked here: the public launchers check them first (they call this once
    everything is known to be valid).

    Args:
        command: The argument list to start (``horovodrun``, ``mpirun`` or ``python``).
        launch: The checked shared options (:class:`course_lib.runner.options.Launch`): output,
            environment, time-out, stop event, clean-up grace, ...
        horovod: Lines carry rank prefixes (``[1]<stdout>:``) to parse; else all are rank 0.
        place: The slots to hold while the run lives and how its ranks share them; the shares reach
            the ranks as ``$COURSE_PLACEMENT`` (the command must start them through
            :data:`course_lib.runner.placing.RANK_WRAPPER`). ``None``: hold nothing (runs on other machines).
        script, workers: What the slot files say about the holder.

    Returns:
        The :class:`RunResult`.

    Raises:
        RunFailedError: Non-zero exit (with ``check``). RunTimeoutError: ``timeout`` expired.
        RunStoppedError: ``stop_event`` was set (also while waiting for slots).
    """
    full_env = dict(os.environ)
    full_env.update(launch.env or {})
    full_env.setdefault("PYTHONUNBUFFERED", "1")  # otherwise lines arrive only at exit
    result = RunResult(command=list(command))
    printer = make_printer(launch.output)
    grant = None
    if place is not None and place.slots:
        try:
            grant = slots.acquire(
                min(place.slots, place.capacity.slots), capacity=place.capacity, script=script,
                workers=workers or place.workers, timeout_s=launch.timeout, wait=launch.wait_for_slots,
                stop_event=launch.stop_event, notify=lambda message: printer(message, "stderr"))
        except slots.SlotWaitCancelled:
            raise RunStoppedError("run was stopped while it waited for slots (nothing was "
                                  "launched)", returncode=None, rank=None, tail="",
                                  result=result) from None
        try:
            shares = cut_shares(grant.kind, grant.slots, max(1, place.workers))
        except BaseException:
            grant.release()
            raise
        full_env[PLACEMENT_ENV] = Placement(shares, place.hosts, place.hide_gpus).to_env()
        result.placement = [list(share.cpus or share.gpus) for share in shares]
    else:
        full_env.pop(PLACEMENT_ENV, None)
    try:
        return _stream(command, result, printer, horovod=horovod, show=launch.show, env=full_env,
                       cwd=launch.cwd, timeout=launch.timeout, check=launch.check,
                       stop_event=launch.stop_event, on_event=launch.on_event, grace_s=launch.grace_s,
                       clock=launch.clock, hold_fds=grant.fds if grant else ())
    finally:
        if grant is not None:
            grant.release()


def _stream(command: list[str], result: RunResult, printer: Callable[[str, str], None], *,
            horovod: bool, show: str, env: dict, cwd: Any, timeout: float | None, check: bool,
            stop_event: threading.Event | None, on_event: Callable[[dict], None] | None,
            grace_s: Sequence[float], clock: Callable[[], float],
            hold_fds: Sequence[int]) -> RunResult:
    """Stream ``command``, fill ``result``, and raise on a timeout, a stop or a failure."""
    joiners = {"stdout": TagJoiner(), "stderr": TagJoiner()}
    lock = threading.Lock()

    def on_line(line: str, pipe: str) -> None:
        with lock:
            for joined in joiners.setdefault(pipe, TagJoiner()).feed(line) if horovod else [line]:
                for piece in split_interleaved(joined) if horovod else [joined]:
                    on_piece(piece, pipe)

    def on_piece(line: str, pipe: str) -> None:
        rank, stream, text, event = parse_line(line, horovod=horovod)
        if pipe == "stderr" and (rank is None or not horovod or not names_stream(line)):
            stream = "stderr"  # an unprefixed line's stream is the pipe it came through
        result.add_line(line, rank, stream, text, event)
        if show == "all" or rank is None or (show == "rank0" and rank == 0):
            printer(line if show == "all" else text, stream)
        if event is not None and on_event is not None:
            on_event(event)

    outcome = processes.stream_command(command, on_line, env=env, cwd=cwd, timeout=timeout,
                             stop_event=stop_event, grace_s=grace_s, clock=clock,
                             hold_fds=hold_fds)
    for pipe, joiner in joiners.items():
        for piece in joiner.flush():
            on_piece(piece, pipe)
    result.returncode = outcome.returncode
    result.duration_s = outcome.duration_s
    result.pids = outcome.pids
    what = "horovodrun" if horovod else "python"
    if outcome.reason == "timeout":
        rank, tail = result.failure_tail(TAIL_LINES)
        raise RunTimeoutError(
            f"{what} run exceeded timeout={timeout} s and was ended (no process of it is left); "
            f"raise timeout= or shorten the run. Last lines:\n{tail}",
            returncode=outcome.returncode, rank=None, tail=tail, result=result)
    if outcome.reason == "stopped":
        rank, tail = result.failure_tail(TAIL_LINES)
        raise RunStoppedError(f"{what} run was stopped on request (no process of it is left)",
                              returncode=outcome.returncode, rank=None, tail=tail, result=result)
    if check and outcome.returncode != 0:
        rank, tail = result.failure_tail(TAIL_LINES)
        if not horovod:
            rank, who, source = None, "", "its output"
        elif rank is None:
            who, source = " (no rank could be blamed)", "the log"
        else:
            who, source = f": rank {rank} failed", f"rank {rank}"
        raise RunFailedError(
            f"{what} exited with status {outcome.returncode}{who}. Last lines of {source}:\n{tail}",
            returncode=outcome.returncode, rank=rank, tail=tail, result=result)
    return result
