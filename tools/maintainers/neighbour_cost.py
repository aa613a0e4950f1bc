"""What a neighbour's CPU costs a 2-process job on this machine: the measurement behind ``make record``'s limits.

Usage (on the recording machine, when it is quiet; about 2 minutes)::

    .venv/bin/python tools/maintainers/neighbour_cost.py                # 8 rounds of 2 x 10**7 loop iterations
    .venv/bin/python tools/maintainers/neighbour_cost.py --rounds 4 --iterations 5000000

It waits until the machine is quiet (others under 0.15 cores over 20 s), measures the quiet background for 60 s,
then times a CPU-bound job of 2 processes alone and beside a duty-cycled spin loop (0, 10, 25, 50 and 100 % of a
core), interleaved in rounds (the order rotated and reversed each round, so drift moves every arm alike). During
each job it measures the others' CPU the recorder's way (tools/maintainers/record_watch.py: the machine's busy time minus the
job's own process tree; the spin loop is left out of the tree, so it counts as others). It prints every job and a
table binned by the others' CPU measured, beside the fair-share model of a 2-core job, x2/(2 - others). The
results and the limits chosen from them: docs/recording.md.

Introduced for issue 44 (``make record``).
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("course_tools_record_watch", ROOT / "tools" / "maintainers" / "record_watch.py")
assert _spec is not None and _spec.loader is not None
record_watch = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(record_watch, "Watch"):
    _spec.loader.exec_module(record_watch)

DUTIES = (0.0, 0.10, 0.25, 0.50, 1.0)
BINS = ((0.0, 0.05), (0.05, 0.15), (0.15, 0.30), (0.30, 0.50), (0.50, 0.80), (0.80, 2.0))


def _work(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def _spin(duty: float, stop: "mp.synchronize.Event", period: float = 0.1) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        while time.perf_counter() - start < duty * period:
            pass
        time.sleep(max(0.0, (1 - duty) * period))


def _own(exclude: int | None) -> float:
    """This process tree's CPU-seconds, the spin loop's left out (it is the neighbour)."""
    total = record_watch.tree_cpu_seconds(os.getpid())
    return total - (record_watch.tree_cpu_seconds(exclude) if exclude else 0.0)


def wait_for_quiet(limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = record_watch.busy_cpu_seconds()
        time.sleep(20)
        busy = (record_watch.busy_cpu_seconds() - before) / 20
        print(f"{time.strftime('%H:%M:%S')} machine busy {busy:.2f} cores, load {os.getloadavg()[0]:.2f}", flush=True)
        if busy < 0.15:
            return True
    return False


def measure(rounds: int, iterations: int) -> list[tuple[float, float, float]]:
    """``(duty, others' cores, job seconds)`` of every job."""
    ctx = mp.get_context("fork")
    jobs = []
    for r in range(rounds):
        order = list(DUTIES[r % len(DUTIES):] + DUTIES[:r % len(DUTIES)])
        for duty in order[::-1] if r % 2 else order:
            stop = ctx.Event()
            spinner = ctx.Process(target=_spin, args=(duty, stop)) if duty else None
            if spinner is not None:
                spinner.start()
                time.sleep(0.3)
            pid = spinner.pid if spinner is not None else None
            busy, own, start = record_watch.busy_cpu_seconds(), _own(pid), time.perf_counter()
            with ctx.Pool(2) as pool:
                pool.map(_work, [iterations, iterations])
            seconds = time.perf_counter() - start
            others = ((record_watch.busy_cpu_seconds() - busy) - (_own(pid) - own)) / seconds
            if spinner is not None:
                stop.set()
                spinner.join()
            jobs.append((duty, others, seconds))
            print(f"round {r} duty {duty:.2f}: {seconds:.2f} s, others {others:.2f} cores", flush=True)
    return jobs


def table(jobs: list[tuple[float, float, float]]) -> str:
    alone = [seconds for _, others, seconds in jobs if others < BINS[0][1]]
    if not alone:
        return "no job ran with under 0.05 cores of others: the machine was never quiet enough to compare"
    base = statistics.median(alone)
    lines = [f"baseline: median of {len(alone)} jobs with others under 0.05 cores, {base:.2f} s",
             "| others measured (cores) | jobs | slowdown, median (range) | model x2/(2-x) at the middle |",
             "|---|---|---|---|"]
    for low, high in BINS:
        ratios = [seconds / base for _, others, seconds in jobs if low <= others < high]
        if ratios:
            lines.append(f"| {low:.2f}-{high:.2f} | {len(ratios)} | x{statistics.median(ratios):.2f} "
                         f"({min(ratios):.2f}-{max(ratios):.2f}) | x{2 / (2 - (low + high) / 2):.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=10_000_000, help="loop iterations of each process")
    parser.add_argument("--wait-s", type=float, default=3600, help="give up when not quiet within this time")
    args = parser.parse_args(argv)
    if not wait_for_quiet(args.wait_s):
        print("the machine never became quiet: nothing measured")
        return 1
    before = record_watch.busy_cpu_seconds()
    time.sleep(60)
    print(f"quiet background over 60 s: {(record_watch.busy_cpu_seconds() - before) / 60:.3f} cores", flush=True)
    print(table(measure(args.rounds, args.iterations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
