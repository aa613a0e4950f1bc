"""A middleman that ends a run when its caller dies, whatever killed the caller (SIGKILL too).

:func:`course_lib.runner.processes.stream_command` does not start a run's command itself: it
starts this small program, which starts the command and then watches a pipe whose only writer
is the caller. The caller never writes to it; when the caller dies (a killed Jupyter kernel, an
out-of-memory kill, a crash), the operating system closes its end, the watchdog reads end-of-file
and ends every process of the run: SIGINT, SIGTERM, then SIGKILL, with a short grace period
between the steps. Horovod's own launcher uses a middleman watching a pipe for the same reason.

Gloo starts every rank in a session of its own, so a process group is not enough: the watchdog
records all its descendants (``psutil``) every quarter of a second while the run goes on, and
signals each of them. On Linux it is also a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a
rank whose parents die first (horovodrun ended while it was still starting ranks) is re-parented to
the watchdog instead of to init, so no descendant can leave its tree; before it exits, the watchdog
sweeps its tree until nothing of the run is left. The launcher never SIGKILLs the watchdog before that
sweep is done (:func:`course_lib.runner.processes.terminate_processes`), so an interrupt that races a
rank's start leaves nothing behind (tests/test_startup_race.py).

Everything else is transparent: the command inherits the caller's stdout and stderr pipes, the
watchdog's exit status mirrors the command's (a command killed by signal ``s`` makes the watchdog
end by ``s`` too), and slot locks passed in with ``--hold-fd`` stay held until the watchdog exits
(:mod:`course_lib.runner.slots`), so a run's slots are free only once its processes are gone.
SIGINT is ignored (the caller ends the run itself); SIGTERM ends the run like a caller's death.

This file imports only the standard library and ``psutil``, so it runs by path::

    python course_lib/runner/watchdog.py [--grace 2 2] [--hold-fd 7] -- horovodrun -np 2 ...

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from typing import Callable, Iterable, Sequence

__all__ = ["watchdog_command", "scan_descendants", "alive", "escalate", "become_subreaper", "is_subreaper",
           "reap_adopted", "main"]

_SCAN_S = 0.25
_LEFTOVER_GRACE_S = 2.0


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
    argv = [python, os.path.abspath(__file__), "--grace", str(grace_s[0]), str(grace_s[1])]
    for fd in hold_fds:
        argv += ["--hold-fd", str(fd)]
    return argv + ["--"] + list(command)


def scan_descendants(root_pid: int, tracked: dict) -> None:
    """Add the live descendants of ``root_pid`` to ``tracked`` ({(pid, create_time): Process}).

    Keyed by (pid, create time), so a recycled pid is never mistaken for a recorded process.
    """
    import psutil

    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        try:
            tracked.setdefault((child.pid, child.create_time()), child)
        except psutil.Error:
            continue


def alive(procs: Iterable) -> list:
    """The ``psutil.Process`` objects of ``procs`` that still run (zombies count as gone)."""
    import psutil

    result = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                result.append(proc)
        except psutil.Error:
            continue
    return result


def escalate(targets: Callable[[], list], signal_group: Callable[[int], None],
             reap: Callable[[], object], grace_s: Sequence[float]) -> None:
    """SIGINT, then SIGTERM, then SIGKILL: each to a process group and to every target still alive,
    waiting up to the step's grace period for the targets to go before the next signal.

    Args:
        targets: Returns the ``psutil.Process`` objects to end now (called before each step, so
            descendants born meanwhile are included); an empty list ends the escalation.
        signal_group: Sends a signal to the run's process group.
        reap: Reaps the direct child, so that it does not linger as a zombie.
        grace_s: Seconds granted after SIGINT and after SIGTERM (SIGKILL gets 5 s).
    """
    import psutil

    for sig, grace in ((signal.SIGINT, grace_s[0]), (signal.SIGTERM, grace_s[1]),
                       (signal.SIGKILL, 5.0)):
        procs = targets()
        if not procs:
            return
        signal_group(sig)
        for proc in procs:
            try:
                proc.send_signal(sig)
            except psutil.Error:  # already gone
                continue
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            reap()
            if not alive(procs):
                break
            time.sleep(0.05)


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux >= 3.4); ``False`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def is_subreaper() -> bool:
    """Whether this process is a child subreaper (:func:`become_subreaper`); ``False`` off Linux."""
    if not sys.platform.startswith("linux"):
        return False
    flag = ctypes.c_int(0)
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value == 1
    except (OSError, AttributeError):  # 37: PR_GET_CHILD_SUBREAPER
        return False


def reap_adopted(command_pid: int) -> None:
    """Reap the adopted orphans that died (our zombies now); never the command, whose status we mirror."""
    import psutil

    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for proc in children:
        if proc.pid == command_pid:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(proc.pid, os.WNOHANG)
        except (psutil.Error, OSError):
            continue


def _end_all(child: subprocess.Popen, tracked: dict, grace_s: Sequence[float]) -> None:
    """End the run's process group and every descendant, adopted orphans included."""
    def targets() -> list:
        scan_descendants(os.getpid(), tracked)  # also orphans re-parented to us (subreaper)
        return alive(tracked.values())

    def reap() -> None:
        child.poll()
        reap_adopted(child.pid)

    def signal_group(sig: int) -> None:
        if sig != signal.SIGKILL:  # the group holds this process too: it ignores or handles these
            try:
                os.killpg(os.getpgid(0), sig)
            except OSError:
                pass

    escalate(targets, signal_group, reap, grace_s)


def _prepare_child() -> None:  # pragma: no cover - runs in the child before exec
    """Give the command default SIGINT/SIGTERM handling (an ignored signal would survive exec)
    and, on Linux, SIGTERM when the watchdog itself is killed (horovodrun then ends its ranks)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Start the command, mirror its exit, end the whole run if the caller's pipe closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grace", nargs=2, type=float, default=(2.0, 2.0))
    parser.add_argument("--hold-fd", type=int, action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    terminated = []
    become_subreaper()  # orphans of the run come to us, not to init
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: terminated.append(signum))
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                 preexec_fn=_prepare_child,
                                 restore_signals=True)
    except OSError as exc:
        print(f"watchdog: cannot start {command[0]}: {exc}", file=sys.stderr, flush=True)
        return 127
    # The command now owns the caller's stdout/stderr pipes: drop ours, so that the pipes close
    # when the run's processes are gone.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (1, 2):
        os.dup2(devnull, fd)
    tracked: dict = {}
    caller_gone = False
    while child.poll() is None:
        scan_descendants(os.getpid(), tracked)
        try:
            ready, _, _ = select.select([0], [], [], _SCAN_S)
        except InterruptedError:  # pragma: no cover - PEP 475 retries select
            ready = []
        if ready and not os.read(0, 4096):
            caller_gone = True
            break
        if terminated:
            break
    grace = (min(args.grace[0], _LEFTOVER_GRACE_S), min(args.grace[1], _LEFTOVER_GRACE_S))
    if caller_gone or terminated:
        _end_all(child, tracked, grace)
    else:  # the command exited: give leftovers (a rank still flushing) a moment, then end them
        deadline = time.monotonic() + _LEFTOVER_GRACE_S
        while alive(tracked.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        _end_all(child, tracked, grace)
    for _ in range(3):  # the sweep: whatever was still starting meanwhile was adopted by us
        scan_descendants(os.getpid(), tracked)
        if not alive(tracked.values()):
            break
        _end_all(child, tracked, grace)
    code = child.wait()
    reap_adopted(child.pid)
    for fd in args.hold_fd:  # releases slot locks (after the run's processes are gone)
        try:
            os.close(fd)
        except OSError:
            pass
    if code < 0:  # mirror a death by signal
        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: cannot be caught anyway
            pass
        os.kill(os.getpid(), -code)
        time.sleep(1.0)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
