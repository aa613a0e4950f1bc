"""Horovod script whose rank 1 raises after the first allreduce (launcher crash test).

Rank 0 then blocks in a second allreduce that rank 1 never joins: only the launchers'
shutdown (horovodrun's, then course_lib.runner.launch's) can end it.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402


def fail_deep_inside(step):
    raise RuntimeError(f"rank {hvd.rank()} fails on purpose at step {step}")


def main():
    hvd.init()
    total = hvd.allreduce(tf.constant(1.0), op=hvd.Sum)
    print(f"crash_hvd: rank {hvd.rank()} of {hvd.size()} saw sum {float(total)}", flush=True)
    if hvd.rank() == 1:
        time.sleep(0.5)
        fail_deep_inside(1)
    hvd.allreduce(tf.constant(2.0), op=hvd.Sum)  # never completes: rank 1 is gone
    print("crash_hvd: rank 0 should never get here", flush=True)
    sys.exit(3)


if __name__ == "__main__":
    main()
