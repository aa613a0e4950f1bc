"""An SPMD pitfall: a collective that only rank 0 calls waits for ever.

Description: every rank runs this same program (SPMD: single program, multiple data), and a Horovod collective
(``allreduce``, ``broadcast``, ``allgather``, a metric average) completes only when EVERY rank calls it under the
same name. Here rank 0 averages its accuracy inside ``if hvd.rank() == 0:`` while rank 1 goes on to the next
step's gradient all-reduce: each waits for the other, for ever, with no error. Notebook 03 launches it and
watches the course's launcher end the hung run.

How to run (it hangs: end it with Ctrl-C, or give the job a time limit)::

    horovodrun -np 2 --gloo python source_code/collective_under_rank0.py
"""

import json

import horovod.tensorflow as hvd
import tensorflow as tf


# Horovod matches collectives by name; inside tf.function (as in model.fit) each op keeps the name it is given.
average = tf.function(lambda value, name: hvd.allreduce(value, name=name))


def main():
    hvd.init()  # Horovod: rank 0 and rank 1 run this same file
    accuracy = tf.constant(0.80 + 0.01 * hvd.rank())
    if hvd.rank() == 0:  # WRONG: a collective that only rank 0 calls ...
        print(json.dumps({"event": "waiting", "rank": hvd.rank(), "in": "accuracy"}), flush=True)
        accuracy = average(accuracy, "accuracy")  # ... waits for rank 1, which never calls it
    print(json.dumps({"event": "waiting", "rank": hvd.rank(), "in": "gradients"}), flush=True)
    average(tf.ones(3), "gradients")  # rank 1 waits here for rank 0, which never gets here
    print(json.dumps({"event": "done", "rank": hvd.rank()}), flush=True)  # never printed


if __name__ == "__main__":
    main()
