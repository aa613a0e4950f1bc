"""Probe of the "factor-of-two mode" without TensorFlow: plain busy loops in separate processes.

If the slow mode of ``probe_two_modes.py`` (a ``fit`` running on one core while the machine sits
half idle) came from TensorFlow's thread pool, two independent processes that never wait for
each other could not show it. If it came from the machine (the guest kernel or the hypervisor
leaving one vCPU unused), they show it too: a window in which ``--procs`` busy processes get
about one core's CPU time and the machine is idle about half the time.

Each window starts ``--procs`` forked processes that each run the same fixed integer loop
(calibrated at start to ``--work-s`` seconds on one core), waits for them, and prints one JSON line
``{"event": "busy_window", "wall_s", "cpu_per_wall", "idle_fraction", "steal_fraction", "cpus",
"per_proc_wall_s", "disturbed", ...}`` from ``course_lib.training.cpuclock.CpuClock``; at the end
``{"event": "busy_summary", ...}``.

How to run:
    .venv/bin/python benchmarks/workloads/probe_busy_loops.py --windows 30
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from course_lib.training.flags import positive_int  # noqa: E402  (after the path set-up)


def spin(iterations: int) -> float:
    """Run ``iterations`` of an integer loop; return its wall seconds."""
    start = time.perf_counter()
    x = 0
    for i in range(iterations):
        x = (x + i) & 0xFFFF
    return time.perf_counter() - start


def _worker(iterations: int, out: "mp.Queue[float]") -> None:
    out.put(spin(iterations))


def calibrate(work_s: float) -> int:
    """Iterations that take about ``work_s`` seconds on one core (best of 3 short runs)."""
    probe = 2_000_000
    best = min(spin(probe) for _ in range(3))
    return max(1, int(probe * work_s / best))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the flags."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--procs", type=positive_int, default=2, help="busy processes per window")
    parser.add_argument("--windows", type=positive_int, default=30)
    parser.add_argument("--work-s", type=float, default=2.5,
                        help="seconds of work per process on one core")
    parser.add_argument("--sample-every", type=float, default=0.2,
                        help="seconds between samples of the threads' CPUs")
    args = parser.parse_args(argv)
    if not 0.05 <= args.work_s <= 60:
        parser.error(f"--work-s must be between 0.05 and 60 seconds, got {args.work_s}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the probe; prints JSON lines; returns the exit status."""
    args = parse_args(argv)
    from course_lib.training.cpuclock import CpuClock

    iterations = calibrate(args.work_s)
    ctx = mp.get_context("fork")
    walls = []
    for window in range(args.windows):
        queue: "mp.Queue[float]" = ctx.Queue()
        with CpuClock(expected_cpus=min(args.procs, os.cpu_count() or 1),
                      sample_every_s=args.sample_every) as cpu:
            start = time.perf_counter()
            procs = [ctx.Process(target=_worker, args=(iterations, queue)) for _ in range(args.procs)]
            for proc in procs:
                proc.start()
            per_proc = sorted(queue.get() for _ in procs)
            for proc in procs:
                proc.join()
            wall = time.perf_counter() - start
        walls.append(wall)
        w = cpu.window.to_dict()
        w.pop("wall_s")
        print(json.dumps({"event": "busy_window", "window": window + 1, "wall_s": round(wall, 3),
                          "per_proc_wall_s": [round(p, 3) for p in per_proc],
                          **{k: (round(v, 3) if isinstance(v, float) else v)
                             for k, v in w.items()}}), flush=True)
    med = sorted(walls)[len(walls) // 2]
    print(json.dumps({"event": "busy_summary", "windows": args.windows, "procs": args.procs,
                      "iterations": iterations, "median_wall_s": round(med, 3),
                      "min_wall_s": round(min(walls), 3), "max_wall_s": round(max(walls), 3)}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
