"""Horovod-launchable script whose rank 1 raises deep inside a function (launcher crash test).

Rank 0 ignores SIGINT and sleeps forever, as a rank blocked in a collective that rank 1 never joins
does (a thread waiting in a C call never runs Python's SIGINT handler): only the launchers' shutdown
(horovodrun's, then course_lib.runner.launch's) can end it. No TensorFlow (issue 31: the two ranks'
TensorFlow import and first allreduce were ~10 CPU-s and proved nothing about the launcher);
horovodrun does not need the script to call hvd.init(). --marker TEXT: ignored; lets a test find
the run's processes.
"""

import os
import signal
import time


def fail_deep_inside(rank, step):
    raise RuntimeError(f"rank {rank} fails on purpose at step {step}")


def main():
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
    size = int(os.environ.get("HOROVOD_SIZE", "1"))
    print(f"crash_hvd: rank {rank} of {size} started", flush=True)
    if rank == 1:
        time.sleep(0.5)
        fail_deep_inside(rank, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a rank stuck in a collective
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    main()
