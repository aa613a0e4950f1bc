"""CPU clock around a measured interval: did the workload get the cores it should have?

A wall-clock time alone cannot tell a slow program from a disturbed machine. :class:`CpuClock`
records, around an interval, the process tree's CPU time (user + system, children included), the
machine's idle and steal time (``/proc/stat``), the number of runnable threads
(``procs_running``) and, when sampling, which CPUs the process's threads ran on
(``/proc/<pid>/task/*/stat`` field 39). :func:`judge` turns that into a verdict ``disturbed``:
the machine took time away (steal), cores sat idle while the workload should have filled them
(e.g. a wait inside the timed interval: benchmarks/README.md, "The factor-of-two mode", was one),
or the workload got far less CPU than the threads it runs.

No TensorFlow here; psutil is imported when a clock starts. Introduced in
notebooks/02_mirrored_strategy.ipynb (through the throughput meter's per-epoch CPU/wall).
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from course_lib.training.machine.hardware import cpu_cores

__all__ = ["ProcStat", "CpuWindow", "CpuClock", "read_proc_stat", "thread_cpus",
           "process_tree_cpu_s", "judge"]

#: Defaults of :func:`judge` (fractions of the machine's jiffies, and of the expected CPU/wall).
STEAL_LIMIT = 0.05
IDLE_LIMIT = 0.20
CPU_SHARE_LIMIT = 0.75


@dataclass(frozen=True)
class ProcStat:
    """Machine-wide counters of ``/proc/stat`` (jiffies summed over CPUs; ``procs_running`` now)."""

    total: int
    idle: int
    steal: int
    procs_running: int


def read_proc_stat(path: str | Path = "/proc/stat") -> ProcStat:
    """Read the aggregate ``cpu`` line and ``procs_running``.

    Args:
        path: The file (a fake one in tests).

    Returns:
        A :class:`ProcStat`; idle includes iowait (a core waiting is a core not computing).

    Raises:
        ValueError: No ``cpu`` line in the file.
    """
    total = idle = steal = running = -1
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:]]
            values += [0] * (8 - len(values))
            # user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
            total, idle, steal = sum(values[:8]), values[3] + values[4], values[7]
        elif parts and parts[0] == "procs_running":
            running = int(parts[1])
    if total < 0:
        raise ValueError(f"{path}: no aggregate 'cpu' line; is this a Linux /proc/stat?")
    return ProcStat(total, idle, steal, max(running, 0))


def thread_cpus(pid: int, proc_root: str | Path = "/proc") -> dict[int, tuple[int, int]]:
    """Each thread of ``pid``: ``{tid: (cpu it last ran on, its user + system ticks)}``.

    The CPU is field 39 ``processor`` of ``/proc/<pid>/task/<tid>/stat``, the ticks fields 14
    and 15. A sleeping thread keeps reporting the CPU it last ran on, so :class:`CpuClock`
    counts a thread's CPU only when its ticks grew since the previous sample. Threads that end
    while being read are skipped.
    """
    found: dict[int, tuple[int, int]] = {}
    task_dir = Path(proc_root) / str(pid) / "task"
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces: count fields after its closing ')'.
        fields = text.rsplit(")", 1)[1].split()
        if len(fields) > 36 and task.name.isdigit():
            # field n overall is index n - 3 here: 14 utime, 15 stime, 39 processor
            found[int(task.name)] = (int(fields[36]), int(fields[11]) + int(fields[12]))
    return found


def process_tree_cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds of ``pid`` (default: this process), its waited-for children and
    its live descendants."""
    import psutil

    proc = psutil.Process(pid)
    t = proc.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in proc.children(recursive=True):
        try:
            c = child.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system
    return total


@dataclass
class CpuWindow:
    """What :class:`CpuClock` recorded over one interval.

    ``cpu_per_wall`` is how many cores the process tree kept busy on average;
    ``idle_fraction`` / ``steal_fraction`` are machine idle (incl. iowait) / steal jiffies over
    all jiffies of all CPUs; ``procs_running`` is the maximum over the readings; ``cpus`` the
    CPUs the threads were seen running on (empty unless sampled); ``disturbed`` / ``reasons``
    the verdict of :func:`judge` against ``expected_cpus``.
    """

    wall_s: float
    cpu_s: float
    cpu_per_wall: float
    idle_fraction: float
    steal_fraction: float
    idle_jiffies: int
    steal_jiffies: int
    total_jiffies: int
    procs_running: int
    cpus: list[int] = field(default_factory=list)
    expected_cpus: float = 1.0
    disturbed: bool = False
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (for JSON lines and results files)."""
        return asdict(self)


def judge(window: CpuWindow, *, fills_machine: bool = True, steal_limit: float = STEAL_LIMIT,
          idle_limit: float = IDLE_LIMIT, cpu_share_limit: float = CPU_SHARE_LIMIT) -> CpuWindow:
    """Set ``window.disturbed`` and ``window.reasons``.

    Args:
        window: The recorded interval (its ``expected_cpus`` is used).
        fills_machine: The workload (with its companions, e.g. the other Horovod ranks) should
            keep every core busy, so machine idle time means a core sat unused.
        steal_limit: Steal above this fraction: the hypervisor took the CPU.
        idle_limit: Idle above this fraction while ``fills_machine``: cores sat unused.
        cpu_share_limit: CPU/wall below this share of ``expected_cpus``: the workload ran on
            fewer cores than it should (other load, or its thread pool on one thread).

    Returns:
        The same window, judged.
    """
    reasons = []
    if window.steal_fraction > steal_limit:
        reasons.append(f"steal {window.steal_fraction:.0%} > {steal_limit:.0%}")
    if fills_machine and window.idle_fraction > idle_limit:
        reasons.append(f"machine idle {window.idle_fraction:.0%} > {idle_limit:.0%}")
    if window.cpu_per_wall < cpu_share_limit * window.expected_cpus:
        reasons.append(f"CPU/wall {window.cpu_per_wall:.2f} < {cpu_share_limit:g} x "
                       f"{window.expected_cpus:g} expected")
    window.disturbed, window.reasons = bool(reasons), reasons
    return window


class CpuClock:
    """Context manager (or ``start()`` / ``stop()``) recording a :class:`CpuWindow`.

    Args:
        expected_cpus: Cores the workload should keep busy; default: the CPUs this process may
            run on (:func:`course_lib.training.machine.hardware.cpu_cores`).
        fills_machine: See :func:`judge`.
        sample_every_s: Sample ``procs_running`` and the threads' CPUs from a background thread
            this often; None: only read at start and stop (cheap, e.g. once per epoch).
        pid: Process to watch (default: this one).
        clock / cpu_time / stat_reader / cpus_reader: Injected in tests.
    """

    def __init__(self, *, expected_cpus: float | None = None, fills_machine: bool = True,
                 sample_every_s: float | None = None, pid: int | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 cpu_time: Callable[[], float] | None = None,
                 stat_reader: Callable[[], ProcStat] = read_proc_stat,
                 cpus_reader: Callable[[], dict[int, tuple[int, int]]] | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.expected_cpus = float(expected_cpus) if expected_cpus else float(cpu_cores())
        self.fills_machine = fills_machine
        self.sample_every_s = sample_every_s
        self.clock = clock
        self.cpu_time = cpu_time or (lambda: process_tree_cpu_s(self.pid))
        self.stat_reader = stat_reader
        self.cpus_reader = cpus_reader or (lambda: thread_cpus(self.pid))
        self.window: CpuWindow | None = None
        self._ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        self._running.append(self.stat_reader().procs_running)
        threads = self.cpus_reader()
        for tid, (cpu, ticks) in threads.items():
            if ticks > self._ticks.get(tid, 0):  # it ran since the last sample (or is new)
                self._cpus.add(cpu)
        self._ticks = {tid: ticks for tid, (_, ticks) in threads.items()}

    def _loop(self) -> None:
        while not self._stop.wait(self.sample_every_s):
            self._sample()

    def start(self) -> "CpuClock":
        """Read the counters and, if sampling, start the sampler thread."""
        self._running: list[int] = []
        self._cpus: set[int] = set()
        self._ticks = {}
        if self.sample_every_s:
            self._ticks = {tid: ticks for tid, (_, ticks) in self.cpus_reader().items()}
        self._stat0 = self.stat_reader()
        self._running.append(self._stat0.procs_running)
        self._cpu0 = self.cpu_time()
        self._t0 = self.clock()
        if self.sample_every_s:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="cpuclock", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> CpuWindow:
        """Read the counters again; returns (and keeps in ``.window``) the judged window."""
        t1 = self.clock()
        cpu1 = self.cpu_time()
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample()
        stat1 = self.stat_reader()
        self._running.append(stat1.procs_running)
        wall = t1 - self._t0
        total = stat1.total - self._stat0.total
        idle, steal = stat1.idle - self._stat0.idle, stat1.steal - self._stat0.steal
        self.window = judge(CpuWindow(
            wall_s=wall, cpu_s=cpu1 - self._cpu0,
            cpu_per_wall=(cpu1 - self._cpu0) / wall if wall > 0 else math.nan,
            idle_fraction=idle / total if total > 0 else 0.0,
            steal_fraction=steal / total if total > 0 else 0.0,
            idle_jiffies=idle, steal_jiffies=steal, total_jiffies=total,
            procs_running=max(self._running), cpus=sorted(self._cpus),
            expected_cpus=self.expected_cpus), fills_machine=self.fills_machine)
        return self.window

    def __enter__(self) -> "CpuClock":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
