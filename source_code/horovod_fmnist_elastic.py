"""Horovod Elastic: the minimal Horovod script made elastic, so that workers may come and go.

Description: ``source_code/horovod_fmnist_minimal.py`` plus the lines that make it elastic, each marked
``# Horovod`` (the four elastic changes numbered): the training state (weights, optimizer, epoch) is
committed in memory at every epoch end; when a worker dies or a host is added, the survivors roll back to the
last commit, form a new group at its new size, re-shard the data, rescale the learning rate and carry on
until the last epoch. Notebook 06 prints the difference with ``course_lib.lessons.common.script_diff``. The lines
marked ``# Course`` only serve notebook 06's drill (the JSON lines its launcher reads, and
``--regrow-wait-s``); delete them and the script runs without course_lib.

How to run (from the repository root; 2 workers that may shrink to 1 and grow back to 2)::

    horovodrun -np 2 --min-np 1 --max-np 2 --host-discovery-script cluster/discover_hosts.sh \
        --network-interface lo --blacklist-cooldown-range 1 2 \
        python source_code/horovod_fmnist_elastic.py --epochs 6 --train-subset 1024

Elastic mode always uses Gloo. On one machine the discovery script names it twice (``localhost`` and
``127.0.0.1``), because Horovod blacklists the whole host of a failed worker. ``--regrow-wait-s S`` is for
drills (notebook 06, tests/test_ssh_hosts.py): the first epoch end after a shrink waits up to S s for the
driver to take a worker back in, so that the regrowth shows on any machine; a real job carries on at once
and grows at a later commit.
"""

import argparse
import hashlib
import json
import math
import os
import random

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 2 before TensorFlow loads: Horovod's Keras layer needs it

import horovod.tensorflow.keras as hvd  # Horovod
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tf_keras as keras  # Keras 2 (the variable above makes tf.keras this one too)

from course_lib.training import autograph, drills  # Course: notebook 06's JSON lines and drill; start-up time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=128, help="images per step PER WORKER")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate per worker")
    parser.add_argument("--train-subset", type=int, default=60000, help="first N training images")
    parser.add_argument("--test-subset", type=int, default=10000, help="first N test images")
    parser.add_argument("--data-dir", default=None,
                        help="tfds data folder (as tfds.load(data_dir=)); default: "
                        "$COURSE_TFDS_DIR, else $TFDS_DATA_DIR, else ~/tensorflow_datasets")
    parser.add_argument("--seed", type=int, default=42, help="seed of weights and data order")
    parser.add_argument("--regrow-wait-s", type=drills.wait_seconds, default=0.0,  # Course: drills only
                        help="at the first epoch end after a shrink, wait up to S s for the group to regrow")  # Course
    args = parser.parse_args()
    if args.data_dir:  # images() reads the folder where the course's other scripts read it too
        os.environ["COURSE_TFDS_DIR"] = args.data_dir
    return args


def images(split, n):
    """The first n images of a Fashion-MNIST split, scaled to [0, 1] (from --data-dir)."""
    folder = os.environ.get("COURSE_TFDS_DIR")  # None: tfds's own folder
    ds = tfds.load("fashion_mnist", split=f"{split}[:{n}]", as_supervised=True, download=False,
                   data_dir=os.path.expanduser(folder) if folder else None)
    return ds.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y))


def main():
    args = parse_args()
    regrow = drills.RegrowWait(args.regrow_wait_s)  # Course: --regrow-wait-s (drills only)
    autograph.leave_horovod_unconverted()  # Course: 2-3 s less start-up per rank, the same graph
    hvd.init()  # Horovod (1/5): join the workers that horovodrun started
    gpus = tf.config.list_physical_devices("GPU")  # Horovod (2/5): pin one GPU per process,
    if gpus:  # Horovod: local rank i sees only GPU i (as /gpu:0)
        gpu = gpus[hvd.local_rank() % len(gpus)]  # Horovod: more workers than GPUs share one
        tf.config.set_visible_devices(gpu, "GPU")  # Horovod: this process sees only its GPU
        tf.config.experimental.set_memory_growth(gpu, True)  # Horovod: allocate as needed
    # What keras.utils.set_random_seed does, without the seed generator that tf_keras 2.18 breaks on
    # Python 3.12 (tf-keras#803): Python's, NumPy's and TensorFlow's generators.
    random.seed(args.seed)
    np.random.seed(args.seed)
    tf.random.set_seed(args.seed)

    def shard():  # Horovod Elastic: the data of the CURRENT group, built again after every reset
        train = images("train", args.train_subset)
        train = train.shard(hvd.size(), hvd.rank())  # Horovod: each worker reads its own shard
        train = train.shuffle(10_000, seed=args.seed).batch(args.batch_size).repeat()
        # Horovod: one epoch = one pass over the data by ALL workers together, so each runs 1/size.
        steps_per_epoch = math.ceil(args.train_subset / (args.batch_size * hvd.size()))
        return train, steps_per_epoch

    model = keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Dropout(0.25),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(10),
    ])
    # Horovod (3/5): scale the LR with the workers; for Adam by the square root, the course's starting rule
    # (Horovod's own examples scale linearly; notebook 04 runs Adam both ways and lets validation decide).
    optimizer = keras.optimizers.Adam(args.lr * math.sqrt(hvd.size()))
    optimizer = hvd.DistributedOptimizer(optimizer)  # Horovod (4/5): average gradients
    model.compile(optimizer=optimizer, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def warm_up():  # Horovod Elastic: one training step, so that the optimizer's slots exist
        model.fit(shard()[0].take(1), steps_per_epoch=1, epochs=1, verbose=0)

    warm_up()  # Horovod Elastic: before the state is created (a newcomer does it here, the others in on_reset)
    # Horovod Elastic (1/4): what survives a reset: the weights, the optimizer's slots, the epoch count.
    # It replaces the broadcast: every (re-)formed group starts from rank 0's copy of the state.
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    def on_reset():  # Horovod Elastic (2/4): after a worker left or joined, before training goes on
        warm_up()  # Horovod Elastic: the same collectives as a newcomer's warm-up, else it hangs (horovod#2652)
        state.restore()  # Horovod Elastic: back to the last commit (the warm-up step moved the weights)
        lr = args.lr * math.sqrt(hvd.size())  # Horovod Elastic: the LR for the NEW number of workers
        keras.backend.set_value(model.optimizer.learning_rate, lr)
        drills.report_reset(hvd.rank(), hvd.size(), state.epoch, lr)  # Course: reset and worker events

    state.register_reset_callbacks([on_reset])  # Horovod Elastic: on_reset runs after every reset
    drills.announce(hvd.rank(), hvd.size())  # Course: the drill learns each worker's pid

    @hvd.elastic.run  # Horovod Elastic (3/4): after a reset, run this again from the last commit
    def train_elastic(state):
        train, steps_per_epoch = shard()  # Horovod Elastic: re-shard for the current group
        if hvd.rank() == 0:  # Horovod: rank 0 alone logs
            print(f"training epochs {state.epoch + 1}..{args.epochs} on {hvd.size()} worker(s)", flush=True)
        callbacks = [hvd.callbacks.MetricAverageCallback(),  # Horovod: log metrics averaged over workers
                     drills.epoch_events(hvd.rank(), hvd.size(), steps_per_epoch, state.epoch),  # Course
                     # Horovod Elastic (4/4): count finished epochs in the state, and commit it at each
                     # epoch end (a commit also asks the driver whether hosts came or went)
                     hvd.elastic.UpdateEpochStateCallback(state),
                     hvd.elastic.CommitStateCallback(state, batches_per_commit=10**9)]
        callbacks += [drills.commit_events(state, hvd.rank(), hvd.size()), regrow.callback(state, hvd.size())]  # Course
        model.fit(train, epochs=args.epochs - state.epoch, steps_per_epoch=steps_per_epoch, callbacks=callbacks,
                  verbose=2 if hvd.rank() == 0 else 0)  # Horovod Elastic: only the epochs still to do

    train_elastic(state)

    if hvd.rank() == 0:  # Horovod: rank 0 alone evaluates and reports
        test = images("test", args.test_subset).batch(256)
        loss, accuracy = model.evaluate(test, verbose=0)
        print(json.dumps({"event": "result", "workers": hvd.size(), "test_accuracy": accuracy,
                          "test_loss": loss, "epochs_done": state.epoch}))  # Horovod Elastic: see below
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes()
                                     for w in model.get_weights())).hexdigest()
    print(json.dumps({"event": "digest", "rank": hvd.rank(), "digest": digest}))
    # Horovod Elastic: a survivor can leave train() early without an exception on some TensorFlow errors
    # (horovod/tensorflow/elastic.py passes over an UnknownError that names no Horovod op): fail loudly.
    if state.epoch < args.epochs:
        raise SystemExit(f"error: training stopped after epoch {state.epoch} of {args.epochs}")


if __name__ == "__main__":
    main()
