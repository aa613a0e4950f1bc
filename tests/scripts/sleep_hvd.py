"""A Horovod-launchable script that sleeps forever (launcher timeout / interrupt / stop tests).

--stubborn: ignore SIGINT and SIGTERM, so that only SIGKILL ends it.
--marker TEXT: ignored; lets a test find the run's processes.
No TensorFlow: horovodrun does not need the script to call hvd.init().
"""

import argparse
import os
import signal
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stubborn", action="store_true")
    parser.add_argument("--marker", default=None)
    args, _ = parser.parse_known_args()
    if args.stubborn:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rank = os.environ.get("HOROVOD_RANK", "0")
    print(f"sleep_hvd: rank {rank} pid {os.getpid()} sleeping", flush=True)
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    main()
