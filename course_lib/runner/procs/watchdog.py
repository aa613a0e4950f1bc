"""A middleman that ends a run when its caller dies, whatever killed the caller (SIGKILL too).

:func:`course_lib.runner.procs.processes.stream_command` does not start a run's command itself: it
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
sweep is done (:func:`course_lib.runner.procs.processes.terminate_processes`), so an interrupt that races a
rank's start leaves nothing behind (tests/test_startup_race.py).

Everything else is transparent: the command inherits the caller's stdout and stderr pipes, the
watchdog's exit status mirrors the command's (a command killed by signal ``s`` makes the watchdog
end by ``s`` too), and slot locks passed in with ``--hold-fd`` stay held until the watchdog exits
(:mod:`course_lib.runner.slots`), so a run's slots are free only once its processes are gone.
SIGINT is ignored (the caller ends the run itself); SIGTERM ends the run like a caller's death.

:func:`end_tree` is the one way the course ends processes (SIGINT, SIGTERM, SIGKILL, a grace period between
the steps): the launcher's clean-up, the watchdog, the supervisor of several workers, the tests' local
cluster and the suite's timing driver call it. This file imports only the standard library (``psutil``
inside the functions that walk a process tree), so it runs by path::

    python course_lib/runner/procs/watchdog.py [--grace 2 2] [--hold-fd 7] -- horovodrun -np 2 ...

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

__all__ = ["scan_descendants", "running", "alive", "end_tree", "become_subreaper",
           "is_subreaper", "reap_adopted", "main"]

_SCAN_S = 0.25
_LEFTOVER_GRACE_S = 2.0


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


def running(proc: object) -> bool:
    """Whether ``proc`` still runs (a zombie counts as gone): a ``psutil.Process``, a ``subprocess.Popen``
    (polled, so it is reaped) or a pid (Linux; reaped when it is this process's child)."""
    if isinstance(proc, subprocess.Popen):
        return proc.poll() is None
    if isinstance(proc, int):
        try:
            os.waitpid(proc, os.WNOHANG)  # our child: reap it
        except ChildProcessError:
            pass
        try:
            with open(f"/proc/{proc}/stat") as stat:
                return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    import psutil

    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)  # type: ignore[attr-defined]
    except psutil.Error:
        return False


def alive(procs: Iterable) -> list:
    """Those of ``procs`` that still run (:func:`running`)."""
    return [proc for proc in procs if running(proc)]


def _send(proc: object, sig: int) -> None:
    """Send ``sig`` to ``proc`` (see :func:`running`); one that is gone already is skipped."""
    if isinstance(proc, (int, subprocess.Popen)):
        try:
            os.kill(proc, sig) if isinstance(proc, int) else proc.send_signal(sig)
        except OSError:
            pass
        return
    import psutil

    try:
        proc.send_signal(sig)  # type: ignore[attr-defined]
    except psutil.Error:
        pass


def end_tree(targets: Callable[[], list] | Iterable, *, grace_s: Sequence[float] = (3.0, 3.0),
             interrupt: bool = True, group: int | None = None, kill_group: bool = True,
             reap: Callable[[], object] | None = None, kill_s: float = 5.0) -> None:
    """End a process tree, the one way the course does: SIGINT, then SIGTERM, then SIGKILL, each to a
    process group and to every target still alive, waiting up to the step's grace period for the targets
    to go before the next signal.

    Args:
        targets: The processes (``psutil.Process``, ``subprocess.Popen`` or pids), or a callable that
            returns those to end now (called before each step, so descendants born meanwhile are
            included); nothing left ends the escalation.
        grace_s: Seconds granted after SIGINT and after SIGTERM.
        interrupt: ``False``: start with SIGTERM (a process that has no SIGINT clean-up).
        group: The run's process group, signalled at each step too (``None``: none; one that is gone is skipped).
        kill_group: ``False``: no SIGKILL to ``group`` (it holds the caller, or a watchdog whose SIGKILL
            would orphan what it adopted); its targets still get theirs.
        reap: Reaps the direct child, so that it does not linger as a zombie.
        kill_s: Seconds granted after SIGKILL.

    Introduced in notebooks/03_horovod.ipynb (every launch is ended through it).
    """
    given = None if callable(targets) else list(targets)

    def current() -> list:
        return alive(given) if given is not None else targets()  # type: ignore[operator]

    steps = [(signal.SIGTERM, grace_s[1]), (signal.SIGKILL, kill_s)]
    for sig, grace in ([(signal.SIGINT, grace_s[0])] if interrupt else []) + steps:
        procs = current()
        if not procs:
            return
        if group is not None and (sig != signal.SIGKILL or kill_group):
            try:
                os.killpg(group, sig)
            except OSError:
                pass
        for proc in procs:
            _send(proc, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if reap is not None:
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

    # The group holds this process too: it ignores or handles SIGINT and SIGTERM, and gets no SIGKILL.
    end_tree(targets, grace_s=grace_s, group=os.getpgid(0), kill_group=False, reap=reap)


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
