"""Print where this process may run, then wait for its peers (placement tests; no TensorFlow).

Prints one JSON line ``{"event": "where", "rank": r, "pid": p, "cpus": "<Cpus_allowed_list>",
"grant": $COURSE_GRANT, "cuda": $CUDA_VISIBLE_DEVICES, "source": ...}`` read from /proc/self/status.
--claim: first decide the share as a course script does (course_lib.training.machine.placement.worker_share,
  with Horovod's local rank and size from the environment), so a run without the launcher is tested.
--barrier DIR --peers N: create DIR/<pid> and wait (at most 60 s) until N such files exist, so that
  concurrent runs are alive at the same time when they report.
"""

import argparse
import json
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claim", action="store_true")
    parser.add_argument("--barrier", default=None)
    parser.add_argument("--peers", type=int, default=1)
    args = parser.parse_args()
    source = None
    if args.claim:
        from course_lib.training.machine import placement

        share = placement.worker_share(int(os.environ.get("HOROVOD_LOCAL_RANK", "0")),
                                       int(os.environ.get("HOROVOD_LOCAL_SIZE", "1")), threads=1)
        source = share.source
    if args.barrier:
        os.makedirs(args.barrier, exist_ok=True)
        open(os.path.join(args.barrier, str(os.getpid())), "w").close()
        deadline = time.monotonic() + 60
        while len(os.listdir(args.barrier)) < args.peers and time.monotonic() < deadline:
            time.sleep(0.05)
    with open("/proc/self/status") as status:
        cpus = next(line.split(":", 1)[1].strip() for line in status if line.startswith("Cpus_allowed_list"))
    rank = int(os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    print(json.dumps({"event": "where", "rank": rank, "pid": os.getpid(), "cpus": cpus,
                      "grant": os.environ.get("COURSE_GRANT"), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
                      "source": source, "peers_seen": len(os.listdir(args.barrier)) if args.barrier else 1}),
          flush=True)


if __name__ == "__main__":
    main()
