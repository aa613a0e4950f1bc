"""Horovod, minimal: the plain Keras script plus the five Horovod changes, and nothing else.

Description: a copy-to-your-cluster script. It needs only TensorFlow (2.18 to 2.21) with tf-keras,
Horovod and tensorflow-datasets (no course_lib). Every line that is there because of Horovod says
``# Horovod``; the five changes of notebook 03 are numbered. See exactly what changed with
``diff source_code/keras_fmnist.py source_code/horovod_fmnist_minimal.py``.

How to run (prepare Fashion-MNIST once per node first:
``python -c "import tensorflow_datasets as tfds; tfds.load('fashion_mnist')"``, or point ``--data-dir`` at a
prepared tfds folder every node can read)::

    horovodrun -np 2 python source_code/horovod_fmnist_minimal.py --epochs 1 --train-subset 6000

With ``--checkpoint-dir DIR`` rank 0 saves a checkpoint after every epoch; the same command run again
continues after the last saved epoch, on any number of workers (rank 0 restores, then broadcasts).
"""

import argparse
import hashlib
import json
import math
import os
import random

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 2 before TensorFlow loads: Horovod's Keras layer needs it

import horovod.tensorflow as hvd_tf  # Horovod: broadcast_variables
import horovod.tensorflow.keras as hvd  # Horovod
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tf_keras as keras  # Keras 2 (the variable above makes tf.keras this one too)


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
    parser.add_argument("--checkpoint-dir", default=None,
                        help="save a checkpoint here after every epoch; run again to resume from it")
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

    train = images("train", args.train_subset)
    train = train.shard(hvd.size(), hvd.rank())  # Horovod: each worker reads its own shard
    train = train.shuffle(10_000, seed=args.seed).batch(args.batch_size).repeat()
    # Horovod: one epoch = one pass over the data by ALL workers together, so each runs 1/size.
    steps_per_epoch = math.ceil(args.train_subset / (args.batch_size * hvd.size()))

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
    optimizer.build(model.trainable_variables)  # the optimizer's state exists before a restore

    # A checkpoint holds the weights, the optimizer's state and the epoch. A run that finds one continues
    # after its epoch, on the same data order (dropout's masks after a resume are new draws).
    epoch = tf.Variable(0)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch)
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, 2) if args.checkpoint_dir else None
    if manager and manager.latest_checkpoint and hvd.rank() == 0:  # Horovod: rank 0 alone restores
        checkpoint.restore(manager.latest_checkpoint)
        print(json.dumps({"event": "resume", "epoch": int(epoch)}))
    # Horovod (5/5): every worker starts from rank 0's weights, optimizer state and epoch, BEFORE the first
    # step (hvd.callbacks.BroadcastGlobalVariablesCallback(0) would broadcast only after it).
    hvd_tf.broadcast_variables(model.variables + optimizer.variables() + [epoch], root_rank=0)  # Horovod (5/5)

    def save(done, logs):  # after every epoch
        epoch.assign(done + 1)
        if manager and hvd.rank() == 0:  # Horovod: rank 0 alone saves
            manager.save()

    callbacks = [keras.callbacks.LambdaCallback(on_epoch_end=save)]
    callbacks.append(hvd.callbacks.MetricAverageCallback())  # Horovod: log metrics averaged over workers

    model.fit(train.skip(int(epoch) * steps_per_epoch), epochs=args.epochs, initial_epoch=int(epoch),
              steps_per_epoch=steps_per_epoch, callbacks=callbacks,
              verbose=2 if hvd.rank() == 0 else 0)  # Horovod: rank 0 alone logs

    if hvd.rank() == 0:  # Horovod: rank 0 alone evaluates and reports
        test = images("test", args.test_subset).batch(256)
        loss, accuracy = model.evaluate(test, verbose=0)
        print(json.dumps({"event": "result", "workers": hvd.size(), "test_accuracy": accuracy,
                          "test_loss": loss}))
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes()
                                     for w in model.get_weights())).hexdigest()
    print(json.dumps({"event": "digest", "rank": hvd.rank(), "digest": digest}))


if __name__ == "__main__":
    main()
