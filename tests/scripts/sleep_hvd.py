"""A Horovod-launchable script that sleeps forever (launcher timeout / interrupt / stop tests).

--stubborn: ignore SIGINT and SIGTERM, so that only SIGKILL ends it.
--spawn-on-signal: on SIGINT or SIGTERM, start a process in a session of its own (carrying the marker)
  and exit at once: a rank that is spawned while the run is being ended, whose parent dies first
  (what Horovod's Gloo launcher can do; tests/test_startup_race.py).
--marker TEXT: ignored; lets a test find the run's processes.
No TensorFlow: horovodrun does not need the script to call hvd.init().
"""

import argparse
import os
import signal
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stubborn", action="store_true")
    parser.add_argument("--spawn-on-signal", action="store_true")
    parser.add_argument("--marker", default=None)
    args, _ = parser.parse_known_args()
    if args.spawn_on_signal:
        def spawn_late(signum, frame):
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "--marker", str(args.marker)],
                             start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            os._exit(0)

        signal.signal(signal.SIGINT, spawn_late)
        signal.signal(signal.SIGTERM, spawn_late)
    elif args.stubborn:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rank = os.environ.get("HOROVOD_RANK", "0")
    print(f"sleep_hvd: rank {rank} pid {os.getpid()} sleeping", flush=True)
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    main()
