"""Run one command in its own process session, stream its output, and leave nothing behind.

This is the process tier under every launcher (:mod:`course_lib.runner.run`): it knows an argument list
and how to run it (:class:`ProcessSpec`: argv, working directory, deadline, stop event, grace periods),
and nothing of launchers, slots or options. A command (``horovodrun``, ``torchrun`` or ``python``) is
started with ``start_new_session=True``; its stdout and stderr are read by one thread each (so a
stderr line is never cut in two by a stdout write), and every line is handed, with the name of the
stream it came from, to a callback in the *calling* thread as soon as it arrives (so an exception such as ``KeyboardInterrupt`` raised there, or by a notebook
interrupt, reaches the caller).

Horovod's Gloo launcher starts every rank in a session of its own, so killing our process
group alone would orphan the ranks. While the command runs, all its descendants are therefore
recorded (``psutil``) and, when the run ends for any reason, whatever is still alive of them is
sent SIGINT, then SIGTERM, then SIGKILL, with a short grace period between the steps.

If the caller itself dies (a killed kernel, SIGKILL included), no ``finally`` runs; so the
command is started under :mod:`course_lib.runner.procs.watchdog`, a middleman that watches a pipe only
the caller holds and ends the whole run within seconds of the caller's death.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, cast

from course_lib.runner.procs import watchdog as watchdog_module
from course_lib.runner.procs.watchdog import alive, end_tree, scan_descendants

__all__ = ["ProcessSpec", "ProcessOutcome", "watchdog_command", "stream_command", "terminate_processes"]

_EOF = object()
_POLL_S = 0.1
_DESCENDANT_SCAN_S = 0.25
_DRAIN_AFTER_EXIT_S = 2.0
#: How long a run whose output has ended may take to exit by itself (the watchdog waits 2 s for leftovers).
_WATCHDOG_EXIT_S = 10.0


@dataclass(frozen=True)
class ProcessSpec:
    """One argument list to run, and how: what :func:`stream_command` reads.

    Attributes:
        argv: The argument list (never a shell string).
        cwd: Working directory (``None``: this process's).
        timeout: Seconds before the run is ended (reason ``"timeout"``); ``None``: no limit.
        stop_event: Set from another thread to end the run (reason ``"stopped"``).
        grace_s: Seconds after SIGINT and after SIGTERM when the run is ended.
        clock: Monotonic clock for the timeout and the duration (injectable for tests).
    """

    argv: Sequence[str]
    cwd: str | os.PathLike[str] | None = None
    timeout: float | None = None
    stop_event: threading.Event | None = None
    grace_s: Sequence[float] = (3.0, 3.0)
    clock: Callable[[], float] = time.monotonic


@dataclass
class ProcessOutcome:
    """What happened to a streamed command.

    Attributes:
        returncode: Exit status of the command (negative: killed by that signal, e.g. during
            the clean-up after a timeout or a stop).
        duration_s: Seconds from start to the end of clean-up.
        reason: ``"exited"``, ``"timeout"`` or ``"stopped"``.
        pids: Every process id seen in the run (the command and all its descendants).
    """

    returncode: int | None
    duration_s: float
    reason: str
    pids: list[int] = field(default_factory=list)


def _reader(stream, lines: "queue.Queue[object]", name: str) -> None:
    """Put ``(name, line)`` for every line of ``stream`` (decoded, ending removed) into ``lines``, then EOF."""
    try:
        for raw in iter(stream.readline, b""):
            lines.put((name, raw.decode("utf-8", errors="replace").rstrip("\r\n")))
    except (OSError, ValueError):  # pipe closed under us during clean-up
        pass
    finally:
        lines.put(_EOF)


def watchdog_command(command: list[str], *, grace_s: tuple[float, float] = (2.0, 2.0),
                     hold_fds: list[int] | tuple[int, ...] = (),
                     python: str = sys.executable) -> list[str]:
    """The argument list that runs ``command`` under the watchdog.

    Args:
        command: The run's argument list.
        grace_s: Seconds after SIGINT and after SIGTERM when the watchdog ends the run.
        hold_fds: Inherited file descriptors (slot locks) the watchdog keeps open until it exits.
        python: Interpreter of the watchdog (it needs ``psutil``).

    Returns:
        ``[python, <this file>, --grace, a, b, (--hold-fd, fd)..., --, *command]``.
    """
    argv = [python, os.path.abspath(watchdog_module.__file__), "--grace", str(grace_s[0]), str(grace_s[1])]
    for fd in hold_fds:
        argv += ["--hold-fd", str(fd)]
    return argv + ["--"] + list(command)


def terminate_processes(
    popen: subprocess.Popen, tracked: dict, grace_s: Sequence[float] = (3.0, 3.0),
    watchdog: bool = False,
) -> None:
    """End ``popen``'s process group and every tracked descendant: SIGINT, SIGTERM, SIGKILL.

    With ``watchdog``, ``popen`` is :mod:`course_lib.runner.procs.watchdog`, the subreaper of the run: the
    escalation spares it (SIGKILLing it first would hand the orphans it adopts to init); then its pipe
    is closed and it gets SIGTERM, sweeps its whole tree and exits, and only a watchdog still alive
    after that sweep's longest time is killed.

    Args:
        popen: The command started with ``start_new_session=True`` (its pid is the group id).
        tracked: Descendants recorded while it ran, ``{(pid, create_time): psutil.Process}``.
        grace_s: Seconds to wait after SIGINT and after SIGTERM before the next signal.
        watchdog: ``popen`` is the run's watchdog.
    """
    import psutil

    if popen.poll() is None:
        scan_descendants(popen.pid, tracked)
    try:
        root = [psutil.Process(popen.pid)] if popen.poll() is None else []
    except psutil.Error:
        root = []
    spare = {popen.pid} if watchdog else set()

    def targets() -> list:
        procs = alive(root + list(tracked.values()))
        return [p for p in procs if p.pid not in spare] if watchdog else procs

    # With a watchdog, the group holds it: a SIGKILL to the group would orphan what it adopted.
    end_tree(targets, grace_s=grace_s, group=popen.pid, kill_group=not watchdog, reap=popen.poll)
    if watchdog and popen.poll() is None:
        if popen.stdin is not None:
            try:
                popen.stdin.close()  # the caller is "gone": the watchdog ends the run and exits
            except OSError:
                pass
        try:
            popen.send_signal(signal.SIGTERM)
        except OSError:
            pass
        try:  # its sweep: up to 4 rounds of SIGINT, SIGTERM (2 s each at most) and SIGKILL (5 s)
            popen.wait(timeout=4 * (min(grace_s[0], 2.0) + min(grace_s[1], 2.0) + 5.0) + 5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - a watchdog stuck past its sweep
            popen.kill()
    try:
        popen.wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


def stream_command(
    spec: ProcessSpec,
    on_line: Callable[[str, str], None],
    *,
    env: Mapping[str, str] | None = None,
    hold_fds: Sequence[int] = (),
    watchdog: bool = True,
) -> ProcessOutcome:
    """Run ``spec.argv`` in a new session and call ``on_line`` for each output line as it comes.

    Nothing is hidden: every line of both streams reaches ``on_line(line, stream)``, with
    ``stream`` = ``"stdout"`` or ``"stderr"``, so the caller can show each line on the stream it
    was written to. ``on_line`` runs in the calling thread; whatever it raises
    (``KeyboardInterrupt`` included) propagates after the clean-up.

    Args:
        spec: What to run and how (:class:`ProcessSpec`: argv, cwd, timeout, stop event, grace, clock).
        on_line: Called with each line (without its line ending) and its stream's name.
        env: Complete environment of the command (``None``: inherit).
        hold_fds: File descriptors (slot locks) the watchdog keeps open until the run's
            processes are gone (ignored without ``watchdog``).
        watchdog: Start the command under :mod:`course_lib.runner.procs.watchdog`, so that the run
            ends within seconds if this process dies (the watchdog is the first pid of the run).

    Returns:
        A :class:`ProcessOutcome`. Whatever the outcome, no process of the run is left alive,
        not even when this process is killed (with ``watchdog``).

    Raises:
        OSError: If the command cannot be started.
    """
    clock, timeout, stop_event, grace_s = spec.clock, spec.timeout, spec.stop_event, spec.grace_s
    start = clock()
    argv = list(spec.argv)
    if watchdog:
        path = env.get("PATH") if env is not None else None
        if shutil.which(argv[0], path=path) is None and not (
                os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK)):
            raise FileNotFoundError(2, "No such executable", argv[0])
        argv = watchdog_command(argv, grace_s=(float(grace_s[0]), float(grace_s[1])),
                                hold_fds=list(hold_fds))
    popen = subprocess.Popen(
        argv,
        # The watchdog's stdin is a pipe only this process writes to: it closes when we die.
        stdin=subprocess.PIPE if watchdog else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=spec.cwd,
        start_new_session=True,
        pass_fds=tuple(hold_fds) if watchdog else (),
    )
    # One reader per pipe: both streams end up in one queue, yet a line written to stderr is
    # never cut in two by a write to stdout (mpirun writes its tags and texts separately).
    lines: "queue.Queue[object]" = queue.Queue()

    def deliver(item: object) -> None:
        pipe_name, text = cast("tuple[str, str]", item)
        on_line(text, pipe_name)

    readers = [
        threading.Thread(target=_reader, args=(pipe, lines, name), daemon=True)
        for pipe, name in ((popen.stdout, "stdout"), (popen.stderr, "stderr"))
    ]
    for reader in readers:
        reader.start()
    open_pipes = len(readers)
    tracked: dict = {}
    reason = "exited"
    next_scan = 0.0
    exited_at: float | None = None
    outputs_closed = False
    try:
        while True:
            now = clock()
            if popen.poll() is None and now >= next_scan:
                scan_descendants(popen.pid, tracked)
                next_scan = now + _DESCENDANT_SCAN_S
            try:
                item = lines.get(timeout=_POLL_S)
            except queue.Empty:
                item = None
            if item is _EOF:
                open_pipes -= 1
                if open_pipes == 0:
                    outputs_closed = True
                    break
                continue
            if item is not None:
                deliver(item)
                continue
            if timeout is not None and clock() - start >= timeout:
                reason = "timeout"
                break
            if stop_event is not None and stop_event.is_set():
                reason = "stopped"
                break
            if popen.poll() is not None:
                # The command exited but a descendant still holds the pipe open.
                exited_at = clock() if exited_at is None else exited_at
                if clock() - exited_at >= _DRAIN_AFTER_EXIT_S:
                    break
    finally:
        if outputs_closed and watchdog:
            # Every writer closed the pipes: the run is ending by itself. Give the watchdog (and
            # horovodrun, which may still be finishing) time to exit before anything is signalled.
            try:
                popen.wait(timeout=_WATCHDOG_EXIT_S)
            except subprocess.TimeoutExpired:
                pass
        terminate_processes(popen, tracked, grace_s, watchdog=watchdog)
        if popen.stdin is not None and not popen.stdin.closed:
            popen.stdin.close()  # a watchdog still alive would now end whatever is left
        for reader, pipe in zip(readers, (popen.stdout, popen.stderr)):
            reader.join(timeout=2.0)
            if pipe is not None and not reader.is_alive():
                pipe.close()
    # Lines still queued after clean-up (e.g. the ranks' last words) are delivered too.
    while True:
        try:
            item = lines.get_nowait()
        except queue.Empty:
            break
        if item is not _EOF:
            deliver(item)
    pids = [popen.pid] + [pid for pid, _ in tracked]
    return ProcessOutcome(popen.returncode, clock() - start, reason, pids)
