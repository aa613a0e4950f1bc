"""What ``make record`` watches while a notebook runs: other processes' CPU, other runs' slots, queued launches.

A :class:`Watch` samples every ``sample_s`` seconds (0.5 by default), in a thread of the recorder, until stopped:

* **Other processes' CPU.** The machine's busy CPU-seconds (``/proc/stat``, all processes and the time a hypervisor
  stole: :func:`tools.maintainers.suite_profile.busy_cpu_seconds`) minus the CPU-seconds of the recording's own process
  tree: the recorder, the notebook's kernel and every descendant, each counted with its reaped children's
  cumulative times, so a rank that has exited still counts as ours. The recorder is a child subreaper
  (:func:`course_lib.runner.procs.watchdog.become_subreaper`), so an orphan of the run stays in its tree. What is left
  is the others' share; the run is disturbed when it averages more than ``Limits.mean_cores`` over the notebook's
  run, or more than ``Limits.window_cores`` over any ``Limits.window_s`` window (the reasons for the defaults:
  docs/recording.md).
* **Other course runs' slots.** A slot file (``$COURSE_SLOTS_DIR``: course_lib.training.machine.slot_files) locked by a
  process outside the recording's tree, read from ``/proc/locks`` (never by taking a lock: a probe could make the
  notebook's own launch skip a free core). A holder seen in two samples in a row counts (one sample may catch a
  process of ours between its start and the next scan of the tree).
* **A queued launch of the notebook**: a live queue ticket (``queue/t-<ns>-<pid>-…``) of a process of ours.

:meth:`Watch.stop` returns a :class:`Report`; its :meth:`Report.reasons` are why the recording must be refused.
``on_refusal`` is called once, from the thread, as soon as a reason is certain (a window over its limit, a
foreign holder, a queued launch), so the recorder can stop the notebook early.

Introduced for issue 44 (``make record``); used by tools/maintainers/run_notebooks.py.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tools.maintainers.suite_profile import busy_cpu_seconds  # noqa: E402  (the one reader of /proc/stat's busy time)
from course_lib.runner.procs.watchdog import become_subreaper, reap_adopted  # noqa: E402
from course_lib.training.machine.slot_files import Holder, slots_dir  # noqa: E402

_SLOT_FILE = re.compile(r"^(cpu|gpu)-(\d+)\.lock$")


@dataclass(frozen=True)
class Limits:
    """When other processes disturb a recording (cores = CPU-seconds per second; docs/recording.md)."""

    mean_cores: float = 0.10
    window_cores: float = 0.5
    window_s: float = 20.0
    sample_s: float = 0.5

    def describe(self) -> str:
        return (f"other processes may use at most {self.mean_cores:.2f} CPU cores on average over a notebook's run "
                f"and {self.window_cores:.2f} over any {self.window_s:.0f} s")


def tree_cpu_seconds(root_pid: int, seen: dict[int, str] | None = None) -> float:
    """CPU-seconds of ``root_pid`` and its descendants, each with its reaped children's times (``seen`` gets
    every pid found, with its command line's first words)."""
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
            if seen is not None and proc.pid not in seen:
                seen[proc.pid] = " ".join(proc.cmdline())[:300]
        except psutil.Error:
            continue
    return total


def locked_slot_files(folder: Path) -> dict[Path, int]:
    """The slot files of ``folder`` that some process holds locked now, with the locking pid (``/proc/locks``)."""
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return {}
    by_inode: dict[int, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":  # "->": a waiter, not a holder
            continue
        try:
            by_inode[int(parts[5].rsplit(":", 1)[1])] = int(parts[4])
        except (ValueError, IndexError):
            continue
    found = {}
    for path in folder.glob("*.lock"):
        if _SLOT_FILE.match(path.name):
            try:
                inode = path.stat().st_ino
            except OSError:
                continue
            if inode in by_inode:
                found[path] = by_inode[inode]
    return found


def describe_holder(path: Path, lock_pid: int) -> str:
    """Who holds a slot file, from the details its holder wrote into it (course_lib.training.machine.slot_files)."""
    match = _SLOT_FILE.match(path.name)
    kind, slot = (match.group(1), int(match.group(2))) if match else ("cpu", -1)
    try:
        info = json.loads(path.read_text() or "{}")
        fields = {k: info[k] for k in ("user", "pid", "script", "workers", "started", "timeout_s") if k in info}
        holder = Holder(slot=slot, kind=kind, **fields)
    except (OSError, ValueError, TypeError):
        holder = Holder(slot=slot, kind=kind, pid=lock_pid)
    return holder.describe(time.time())


@dataclass
class Report:
    """What one watched run saw."""

    limits: Limits
    seconds: float = 0.0
    own_cpu_s: float = 0.0
    others_cpu_s: float = 0.0
    others_max_window_cores: float = 0.0
    foreign_holders: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    samples: int = 0

    @property
    def others_mean_cores(self) -> float:
        return self.others_cpu_s / self.seconds if self.seconds > 0 else 0.0

    def reasons(self) -> list[str]:
        """Why this run cannot be a recording (empty: it can)."""
        found = []
        lim = self.limits
        if self.others_mean_cores > lim.mean_cores:
            found.append(f"other processes used {self.others_mean_cores:.2f} CPU cores on average over the "
                         f"{self.seconds:.0f} s run (limit {lim.mean_cores:.2f})")
        if self.others_max_window_cores > lim.window_cores:
            found.append(f"other processes used {self.others_max_window_cores:.2f} CPU cores over "
                         f"{min(lim.window_s, self.seconds):.0f} s (limit {lim.window_cores:.2f} in any "
                         f"{lim.window_s:.0f} s)")
        found += [f"another course run held a slot: {who}" for who in self.foreign_holders]
        found += [f"a launch of this notebook waited in the slot queue ({what})" for what in self.queued]
        return found

    def as_entry(self) -> dict:
        """The facts docs/run_times.json keeps about the run's quiet."""
        return {"others_cores_mean": round(self.others_mean_cores, 3),
                "others_cores_max_window": round(self.others_max_window_cores, 3),
                "own_cpu_s": round(self.own_cpu_s, 1)}


class Watch:
    """Samples the machine while a notebook runs (start, then stop); see the module's docstring.

    Args:
        limits: The thresholds and the sampling period.
        folder: The slot folder (default ``$COURSE_SLOTS_DIR`` or /tmp/course-slots).
        machine_cpu: Busy CPU-seconds of "the machine" (tests pass a private one: a process tree of their own).
        on_refusal: Called once, with the first certain reason, from the watching thread.
    """

    def __init__(self, limits: Limits = Limits(), *, folder: Path | None = None,
                 machine_cpu: Callable[[], float] = busy_cpu_seconds,
                 on_refusal: Callable[[str], None] | None = None) -> None:
        self.limits, self.folder = limits, folder or slots_dir()
        self.machine_cpu, self.on_refusal = machine_cpu, on_refusal
        self.seen: dict[int, str] = {}
        self.samples: list[tuple[float, float, float]] = []   # (monotonic s, machine busy s, own s)
        self._suspects: dict[Path, str] = {}
        self._foreign: dict[str, str] = {}   # the other run's pid -> who held a slot
        self._queued: dict[str, None] = {}
        self._max_window = 0.0
        self._refused = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="record-watch", daemon=True)

    def start(self) -> "Watch":
        become_subreaper()
        self._sample()
        self._thread.start()
        return self

    @staticmethod
    def kernel_pid() -> int | None:
        """The notebook's kernel: the recorder's child that runs ipykernel (read now: a child seen between its
        fork and its exec still showed the recorder's command line)."""
        for child in psutil.Process().children():
            try:
                if any("ipykernel" in part for part in child.cmdline()):
                    return child.pid
            except psutil.Error:
                continue
        return None

    def _sample(self) -> None:
        now = time.monotonic()
        kernel = self.kernel_pid()
        if kernel is not None:
            reap_adopted(kernel)  # orphans that came to us and died: their times move into our children's
        own = tree_cpu_seconds(os.getpid(), self.seen)
        self.samples.append((now, self.machine_cpu(), own))
        self._check_window()
        self._check_slots()

    def _check_window(self) -> None:
        """Others' cores over the last ``window_s`` (from the latest sample at least that old)."""
        end_t, end_busy, end_own = self.samples[-1]
        at = bisect.bisect_right([t for t, _, _ in self.samples], end_t - self.limits.window_s) - 1
        if at < 0:
            return
        start_t, start_busy, start_own = self.samples[at]
        cores = ((end_busy - start_busy) - (end_own - start_own)) / (end_t - start_t)
        self._max_window = max(self._max_window, cores)
        if cores > self.limits.window_cores:
            self._refuse(f"other processes used {cores:.2f} CPU cores over {end_t - start_t:.0f} s")

    def _check_slots(self) -> None:
        suspects: dict[Path, str] = {}
        for path, lock_pid in locked_slot_files(self.folder).items():
            holder_pid = _holder_pid(path)
            if self._ours(lock_pid) or self._ours(holder_pid):
                continue
            suspects[path] = who = describe_holder(path, lock_pid)
            run = f"pid {holder_pid or lock_pid}"   # one reason per other run, however many slots it holds
            if path in self._suspects and run not in self._foreign:   # seen twice in a row
                self._foreign[run] = who
                self._refuse(f"another course run held a slot: {who}")
        self._suspects = suspects
        for ticket in (self.folder / "queue").glob("t-*"):
            parts = ticket.name.split("-")
            if len(parts) >= 3 and parts[2].isdigit() and int(parts[2]) in self.seen and \
                    psutil.pid_exists(int(parts[2])):
                what = f"pid {parts[2]}, {self.seen[int(parts[2])][:80]}"
                if what not in self._queued:
                    self._queued[what] = None
                    self._refuse(f"a launch of this notebook waited in the slot queue ({what})")

    def _ours(self, pid: int | None) -> bool:
        if not pid:
            return False
        if pid in self.seen:
            return True
        try:   # started after this sample's scan of the tree?
            return any(parent.pid == os.getpid() for parent in psutil.Process(pid).parents())
        except psutil.Error:
            return False

    def _refuse(self, reason: str) -> None:
        if not self._refused and self.on_refusal is not None:
            self._refused = True
            self.on_refusal(reason)

    def _loop(self) -> None:
        while not self._stop.wait(self.limits.sample_s):
            self._sample()

    def stop(self) -> Report:
        """Stop sampling (one last sample first) and say what the run saw."""
        self._stop.set()
        self._thread.join()
        self._sample()
        (t0, busy0, own0), (t1, busy1, own1) = self.samples[0], self.samples[-1]
        seconds = t1 - t0
        others = (busy1 - busy0) - (own1 - own0)
        window = self._max_window if seconds >= self.limits.window_s else \
            (others / seconds if seconds > 0 else 0.0)   # a run shorter than one window: the run is the window
        return Report(self.limits, seconds=seconds, own_cpu_s=own1 - own0, others_cpu_s=max(0.0, others),
                      others_max_window_cores=max(0.0, window), foreign_holders=list(self._foreign.values()),
                      queued=list(self._queued), samples=len(self.samples))


class Stopper:
    """A Watch's ``on_refusal`` that stops the refused notebook early (a cell's KeyboardInterrupt, else the
    kernel's end, ends the run); ``done`` is set by the recorder when the run is over."""

    def __init__(self, watch: Watch) -> None:
        self.watch, self.reason = watch, ""
        self.done = threading.Event()

    def __call__(self, reason: str) -> None:
        self.reason = reason
        print(f"  refused while running: {reason}; stopping the notebook", flush=True)
        threading.Thread(target=self._stop, daemon=True).start()

    def _stop(self) -> None:
        """SIGINT twice, 5 s apart (a kernel between cells ignores it), then SIGKILL; the course's launches end
        with their kernel (course_lib.runner.procs.watchdog)."""
        sent = 0
        while not self.done.is_set() and sent < 3:
            pid = self.watch.kernel_pid()   # None until the kernel has started
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL if sent == 2 else signal.SIGINT)
                except OSError:
                    pass
                sent += 1
            self.done.wait(5.0 if pid is not None else 0.5)


def _holder_pid(path: Path) -> int | None:
    try:
        pid = json.loads(path.read_text() or "{}").get("pid")
        return pid if isinstance(pid, int) else None
    except (OSError, ValueError, AttributeError):
        return None

