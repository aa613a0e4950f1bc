"""MultiWorkerMirroredStrategy: the plain Keras script on several worker processes, one per host.

Description: ``source_code/keras_fmnist.py`` plus the lines that make it multi-worker, each marked
``# Strategy`` (the four changes numbered), and a restart that continues from the last finished epoch
(``--backup-dir``, Keras' BackupAndRestore). Notebook 06 prints the difference with
``course_lib.lessons.common.script_diff``. The lines marked ``# Course`` only serve notebook 06's drill (the JSON
lines its launcher reads, and a restart that is bit-identical to an uninterrupted run); delete them and the
script runs without course_lib.

How to run: one process per worker, each with its own ``TF_CONFIG`` (the same cluster, its own index);
from a notebook, ``course_lib.runner.multiworker.run_multiworker`` does it::

    TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:12346"]},
                "task": {"type": "worker", "index": 0}}' \
        python source_code/mwms_fmnist.py --epochs 2 --train-subset 1024 &
    TF_CONFIG='{... "index": 1}}' python source_code/mwms_fmnist.py --epochs 2 --train-subset 1024

Without TF_CONFIG it runs as one worker.
"""

import argparse
import hashlib
import json
import math
import os
import random

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 2 before TensorFlow loads: Horovod's Keras layer needs it

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tf_keras as keras  # Keras 2 (the variable above makes tf.keras this one too)

from course_lib.training import drills  # Course: notebook 06's JSON lines and bit-identical restart


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=128, help="images per step PER WORKER")  # Strategy
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--train-subset", type=int, default=60000, help="first N training images")
    parser.add_argument("--test-subset", type=int, default=10000, help="first N test images")
    parser.add_argument("--data-dir", default=None,
                        help="tfds data folder (as tfds.load(data_dir=)); default: "
                        "$COURSE_TFDS_DIR, else $TFDS_DATA_DIR, else ~/tensorflow_datasets")
    parser.add_argument("--seed", type=int, default=42, help="seed of weights and data order")
    parser.add_argument("--backup-dir", default=None,  # Strategy: a restarted job continues from here
                        help="BackupAndRestore folder: backed up after every epoch; a job started again "
                        "with the same folder continues after the last finished epoch")
    parser.add_argument("--collective-timeout", type=float, default=300.0,  # Strategy: a missing peer
                        help="seconds a collective waits for a peer before it fails instead of hanging")
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
    # Strategy (1/4): create the strategy before any other TensorFlow op: it reads TF_CONFIG and
    # starts this worker's server. The timeout turns a peer that never answers into an error.
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=args.collective_timeout))
    rank = strategy.cluster_resolver.task_id or 0  # Strategy: this worker's index; 0 is the chief
    drills.announce(rank, strategy.num_replicas_in_sync)  # Course: the drill learns this worker's pid
    # What keras.utils.set_random_seed does, without the seed generator that tf_keras 2.18 breaks on
    # Python 3.12 (tf-keras#803): Python's, NumPy's and TensorFlow's generators.
    random.seed(args.seed)
    np.random.seed(args.seed)
    tf.random.set_seed(args.seed)
    keras.backend.experimental.enable_tf_random_generator()  # Course: dropout masks a restart can redraw

    # Strategy (2/4): batch the data with the GLOBAL batch, per-worker batch x workers; each step
    # splits it, and each worker computes the gradient of its own part.
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    train = images("train", args.train_subset)
    train = train.shuffle(10_000, seed=args.seed).batch(global_batch).repeat()  # Strategy: the global batch
    steps_per_epoch = math.ceil(args.train_subset / global_batch)  # Strategy: global steps = each worker's
    done = drills.backed_up_epochs(args.backup_dir)  # Course: epochs the backup already holds ...
    train = train.skip(done * steps_per_epoch)  # Course: ... so a restart reads the batches still to come
    # Strategy (3/4): shard by element: each worker keeps its part of every global batch. (The
    # default, AUTO, tries to give each worker its own FILES first: this split is one file.)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train = train.with_options(options)

    with strategy.scope():  # Strategy (4/4): variables created in here are mirrored on every worker
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
        optimizer = keras.optimizers.Adam(args.lr)
        model.compile(optimizer=optimizer, metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = []  # Strategy: BackupAndRestore takes the place of the one-process checkpoint
    if args.backup_dir:  # Strategy: fault tolerance; every worker takes part, the chief writes
        callbacks.append(keras.callbacks.BackupAndRestore(backup_dir=args.backup_dir))
    callbacks += drills.mwms_callbacks(args.seed, rank, strategy.num_replicas_in_sync, steps_per_epoch)  # Course

    model.fit(train, epochs=args.epochs, steps_per_epoch=steps_per_epoch,  # Strategy: the backup sets the first epoch
              callbacks=callbacks, verbose=2 if rank == 0 else 0)  # Strategy: the chief alone logs

    test = images("test", args.test_subset).batch(256)
    # Strategy: every worker evaluates its part of each batch (a collective: all of them must call it)
    loss, accuracy = model.evaluate(test.with_options(options), verbose=0)
    if rank == 0:  # Strategy: the chief alone reports
        print(json.dumps({"event": "result", "workers": strategy.num_replicas_in_sync,
                          "test_accuracy": accuracy, "test_loss": loss}))
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes()
                                     for w in model.get_weights())).hexdigest()
    print(json.dumps({"event": "digest", "rank": rank, "digest": digest}))  # Strategy: this worker's weights


if __name__ == "__main__":
    main()
