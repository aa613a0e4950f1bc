"""CPU time Horovod's background thread takes while the workers do nothing (section 1x).

Launched with ``horovodrun -np N``: every rank calls ``hvd.init()``, waits 1 s, then sleeps for
``--seconds`` while it measures its own process CPU time (``getrusage``, all threads). The only
thing running is Horovod's background thread and its controller (Gloo or MPI), so the result is
the CPU share Horovod takes from the training on a machine whose cores are all busy. It is CPU
time, not wall time, so other load on the machine hardly changes it.

Every rank prints ``{"event": "idle", "rank": r, "cpu_fraction": cpu_s / wall_s}``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Measure and print one JSON line per rank; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if not args.seconds > 0:
        parser.error(f"--seconds must be > 0, got {args.seconds}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import horovod.tensorflow as hvd

    hvd.init()
    time.sleep(1.0)

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    cpu0, wall0 = cpu(), time.perf_counter()
    time.sleep(args.seconds)
    cpu1, wall1 = cpu(), time.perf_counter()
    print(json.dumps({"event": "idle", "rank": hvd.rank(), "workers": hvd.size(),
                      "cpu_s": cpu1 - cpu0, "wall_s": wall1 - wall0,
                      "cpu_fraction": (cpu1 - cpu0) / (wall1 - wall0),
                      "cycle_time_ms": os.environ.get("HOROVOD_CYCLE_TIME")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
