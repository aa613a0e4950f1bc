"""The one engine under every launcher: check, place, hold slots, stream, parse, return a ``RunResult``.

Every public launcher (``run_horovod``, ``run_python``, ``run_mpirun``, ``run_elastic``, ``run_workers``,
``run_multiworker``, ``run_torchrun``) is a few lines over :func:`run`: it names its :class:`Launcher`
(:mod:`course_lib.runner.launchers`) and hands over the script, the workers (a ``WorkerPlan`` or a count) and
the shared options (:class:`RunOptions`, the same keywords on every launcher). :func:`run` then

1. checks the options, the script and its arguments, and the launcher's own options, before anything starts;
2. plans what the launch holds on this machine (:func:`course_lib.runner.slots.plan_placement`: the plan's
   device, or the device rule for a bare count) and builds the command, each rank behind the rank wrapper
   (:mod:`course_lib.runner.place_rank`) when it is placed;
3. holds the slots (:func:`course_lib.runner.slots.acquire`; ``$COURSE_PLACEMENT`` hands each rank its share),
   streams the command under the watchdog (:mod:`course_lib.runner.procs`), shows each line on the stream it
   was written to, parses it (:mod:`course_lib.runner.runlog`) into a :class:`RunResult`;
4. turns a non-zero exit, a timeout or a stop request into one of the errors below, each naming the launcher
   and carrying the failing rank's last lines.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from course_lib.runner import slots
from course_lib.runner.launchers import Launcher, Ranks
from course_lib.runner.preflight import LaunchError, check_common, check_env, check_script, check_strings
from course_lib.runner.procs import processes
from course_lib.runner.runlog import RunResult, TagJoiner, names_stream, parse_line, split_interleaved
from course_lib.runner.slots import RANK_WRAPPER, PlaceRequest, SlotsBusyError, plan_placement
from course_lib.training.machine.capacity import WorkerPlan
from course_lib.training.machine.placement import PLACEMENT_ENV, Placement, cut_shares

__all__ = ["LaunchError", "SlotsBusyError", "RunFailedError", "RunTimeoutError", "RunStoppedError", "RunResult",
           "RunOptions", "OPTION_NAMES", "shared", "make_printer", "execute", "run"]

TAIL_LINES = 15


class RunFailedError(RuntimeError):
    """A run ended with a non-zero status (or was ended by the launcher).

    Attributes:
        returncode: Exit status of the launcher's command.
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


@dataclass(frozen=True)
class RunOptions:
    """The keywords every public launcher takes, with the same names, types and meaning.

    Attributes:
        timeout: Seconds before the run is ended; ``None``: no limit (waiting for slots does not count).
        env: Extra environment variables for the run (added to the current environment), each a ``str``.
        show: Output shown while it runs: ``"rank0"``, ``"all"`` (with rank prefixes) or ``"none"``; the
            launcher's own lines are always shown (``run_python``: always ``"all"``).
        output: ``None`` (print), an ``ipywidgets.Output``, or a callable taking one line.
        check: Raise ``RunFailedError`` on a non-zero exit status.
        python: Interpreter of the ranks (default: this one).
        cwd: Working directory of the run (relative script paths are taken from it).
        stop_event: Set it from another thread to end the run (raises ``RunStoppedError``).
        on_event: Called with every JSON event dict as soon as its line arrives.
        grace_s: Seconds granted after SIGINT and after SIGTERM when ending a run.
        clock: Monotonic clock for ``timeout`` and ``duration_s`` (injectable for tests).
        wait_for_slots: When other runs on this machine hold the slots needed: ``True`` waits in line (a
            message on stderr says the position, the holders and an estimate), ``False`` raises
            ``SlotsBusyError`` naming them.
    """

    timeout: float | None = None
    env: Mapping[str, str] | None = None
    show: str = "rank0"
    output: Any = None
    check: bool = True
    python: str = sys.executable
    cwd: str | os.PathLike[str] | None = None
    stop_event: threading.Event | None = None
    on_event: Callable[[dict], None] | None = None
    grace_s: Sequence[float] = (3.0, 3.0)
    clock: Callable[[], float] = time.monotonic
    wait_for_slots: bool = True

    def checked(self) -> "RunOptions":
        """These options checked, ``python`` as an absolute path and ``env`` as a plain dict.

        Raises:
            LaunchError: A bad value (the message of the check that refused it).
        """
        exe = check_common(self.timeout, self.show, self.output, self.python)
        return replace(self, python=exe, env=check_env(self.env))


OPTION_NAMES = tuple(RunOptions.__dataclass_fields__)


def shared(arguments: Mapping[str, Any]) -> RunOptions:
    """The shared options out of a public launcher's arguments (its ``locals()``), by name."""
    return RunOptions(**{name: arguments[name] for name in OPTION_NAMES})


def make_printer(output: Any) -> Callable[[str, str], None]:
    """A ``printer(line, stream)`` that shows stderr lines on stderr (a notebook shows them in red)."""
    if output is None:
        return lambda line, stream: print(line, flush=True,
                                          file=sys.stderr if stream == "stderr" else sys.stdout)
    if hasattr(output, "append_stdout"):
        return lambda line, stream: (output.append_stderr if stream == "stderr"
                                     else output.append_stdout)(line + "\n")
    return lambda line, stream: output(line)


def _workers(workers: WorkerPlan | int, lowest: int) -> tuple[int, str | None, bool]:
    """``(count, device, oversubscribe)`` of ``workers``: a plan's own, or a count on the device the rule picks."""
    if isinstance(workers, WorkerPlan):
        return workers.workers, workers.device, workers.oversubscribe
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < lowest:
        wanted = "a positive int, e.g. 2" if lowest else "an int >= 0 (machine-wide slots to hold)"
        raise LaunchError(f"workers={workers!r} must be {wanted}, or a WorkerPlan (plan_workers())")
    return workers, None, False


def run(launcher: Launcher, script: str | os.PathLike[str], script_args: Sequence[str],
        workers: WorkerPlan | int, options: RunOptions) -> RunResult:
    """Check, place and run one launch of ``launcher``; its :class:`RunResult`.

    Args:
        launcher: The launcher's description (:mod:`course_lib.runner.launchers`).
        script, script_args: The script (relative: from ``options.cwd``) and its arguments.
        workers: A ``WorkerPlan`` (its ``workers``, ``device`` and ``oversubscribe``) or a count (the device
            rule decides; no oversubscribing). ``python``: the slots its one process holds (0: none).
        options: The shared options.

    Raises:
        LaunchError: Bad input or environment, before anything is launched. SlotsBusyError: busy and
            ``wait_for_slots=False``. RunFailedError, RunTimeoutError, RunStoppedError: see :func:`execute`.
    """
    count, device, oversubscribe = _workers(workers, 0 if launcher.one_process else 1)
    opts = options.checked()
    path = check_script(script, opts.cwd)
    args = check_strings("script_args", script_args)
    if launcher.check is not None:
        launcher.check(count)
    place: PlaceRequest | None
    if launcher.one_process:
        place = plan_placement(1, device=device, hold=count, oversubscribe=True) if count else None
    else:
        place = plan_placement(launcher.ranks or count, hosts=launcher.hosts, device=device,
                               oversubscribe=oversubscribe)
    ranks = Ranks(opts.python, 1 if launcher.one_process else count, (str(path), *args),
                  RANK_WRAPPER if place is not None else (), opts.env or {})
    command = launcher.command(ranks)
    opts = replace(opts, env={**command.env, **(opts.env or {})})
    return execute(command.argv, opts, name=launcher.name.format(workers=count),
                   line_format=launcher.line_format, place=place, script=path.name)


def execute(argv: Sequence[str], options: RunOptions, *, name: str = "python", line_format: str = "gloo",
            place: PlaceRequest | None = None, script: str = "?") -> RunResult:
    """Hold what ``place`` holds and hand it out, then stream ``argv`` under a watchdog (inputs already checked).

    Args:
        argv: The command. options: The checked shared options.
        name: What the errors call the launcher. line_format: Its rank prefix (``"plain"``: one process).
        place: What the run holds on this machine (``None``: nothing). script: What the slot files show.

    Returns:
        The :class:`RunResult`.

    Raises:
        RunFailedError: Non-zero exit (with ``check``). RunTimeoutError: ``timeout`` expired.
        RunStoppedError: ``stop_event`` was set (also while waiting for slots). Each names the launcher.
    """
    env = dict(os.environ)
    env.update(options.env or {})
    env.setdefault("PYTHONUNBUFFERED", "1")  # otherwise lines arrive only at exit
    result = RunResult(command=list(argv))
    printer = make_printer(options.output)
    grant = None
    if place is not None and place.slots:
        try:
            grant = slots.acquire(place, script=script, timeout_s=options.timeout,
                                  wait=options.wait_for_slots, stop_event=options.stop_event,
                                  notify=lambda message: printer(message, "stderr"))
        except slots.SlotWaitCancelled:
            raise RunStoppedError(f"{name} run was stopped while it waited for slots (nothing "
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
    spec = processes.ProcessSpec(tuple(argv), options.cwd, options.timeout, options.stop_event,
                                 options.grace_s, options.clock)
    try:
        return _stream(spec, options, name, line_format != "plain", env, grant.fds if grant else (), result,
                       printer)
    finally:
        if grant is not None:
            grant.release()


def _stream(spec: processes.ProcessSpec, options: RunOptions, name: str, tagged: bool, env: dict[str, str],
            hold_fds: Sequence[int], result: RunResult, printer: Callable[[str, str], None]) -> RunResult:
    """Stream ``spec`` (environment ``env``, slot locks ``hold_fds``), fill ``result``, and raise on a timeout,
    a stop or a failure."""
    show = options.show
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
        if event is not None and options.on_event is not None:
            options.on_event(event)

    outcome = processes.stream_command(spec, on_line, env=env, hold_fds=hold_fds)
    for pipe, joiner in joiners.items():
        for piece in joiner.flush():
            on_piece(piece, pipe)
    result.returncode = outcome.returncode
    result.duration_s = outcome.duration_s
    result.pids = outcome.pids
    if outcome.reason == "timeout":
        rank, tail = result.failure_tail(TAIL_LINES)
        raise RunTimeoutError(
            f"{name} run exceeded timeout={options.timeout} s and was ended (no process of it is left); "
            f"raise timeout= or shorten the run. Last lines:\n{tail}",
            returncode=outcome.returncode, rank=None, tail=tail, result=result)
    if outcome.reason == "stopped":
        rank, tail = result.failure_tail(TAIL_LINES)
        raise RunStoppedError(f"{name} run was stopped on request (no process of it is left)",
                              returncode=outcome.returncode, rank=None, tail=tail, result=result)
    if options.check and outcome.returncode != 0:
        rank, tail = result.failure_tail(TAIL_LINES)
        if not tagged:
            rank, who, source = None, "", "its output"
        elif rank is None:
            who, source = " (no rank could be blamed)", "the log"
        else:
            who, source = f": rank {rank} failed", f"rank {rank}"
        raise RunFailedError(
            f"{name} exited with status {outcome.returncode}{who}. Last lines of {source}:\n{tail}",
            returncode=outcome.returncode, rank=rank, tail=tail, result=result)
    return result
