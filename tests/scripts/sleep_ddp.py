"""A torchrun-launchable script that joins a Gloo group, says so, then sleeps (launcher interrupt tests).

--stubborn: ignore SIGINT and SIGTERM, so that only SIGKILL ends it.
--marker TEXT: ignored; lets a test find the run's processes.
"""

import argparse
import os
import signal
import time

import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stubborn", action="store_true")
    parser.add_argument("--marker", default=None)
    args = parser.parse_args()
    if args.stubborn:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    dist.init_process_group("gloo")
    print(f"sleep_ddp: rank {dist.get_rank()} of {dist.get_world_size()} pid {os.getpid()} "
          f"cores {sorted(os.sched_getaffinity(0))} sleeping", flush=True)
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    main()
