"""tf.distribute.MirroredStrategy training of the course CNN on Fashion-MNIST.

One process drives N replicas (GPUs, or logical CPU devices with ``--devices N`` on a machine
without GPUs): each global batch is split across the replicas, their gradients are summed with
an all-reduce, and every replica applies the same update.

How to run (2 simulated CPU devices, or 2 GPUs)::

    python source_code/mirrored_fmnist.py --devices 2 --epochs 1 --train-subset 6000

The distributed lines are marked ``# Strategy:``. With ``--json`` it prints the same JSON lines
as source_code/horovod_fmnist.py (docs/architecture.md), with ``strategy`` = ``"mirrored"`` and
``workers`` = replicas, so the notebooks can compare both. ``--devices 1`` is its one-worker script:
N copies of it started together (``course_lib.runner.multiworker.run_bound``) are the bound of N replicas (notebook 02).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from course_lib.training import epochs, flags, schedules
from course_lib.training.events import emit
from course_lib.training.flags import positive_int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the flags; every bad flag exits here, before TensorFlow starts."""
    parser = argparse.ArgumentParser(
        description="Train the course CNN on Fashion-MNIST with tf.distribute.MirroredStrategy "
        "(one process, several devices). One epoch = one pass over the training set.",
        epilog="example: python source_code/mirrored_fmnist.py --devices 2 --epochs 1 --train-subset 6000",
        formatter_class=flags.HelpFormatter)
    parser.add_argument("--devices", type=positive_int, default=None,
                        help="simulate N devices (split GPU 0, or the CPU, into N logical devices); "
                        "default: all GPUs, or the one CPU")
    flags.add_training_flags(parser, batch_size=128, epochs=3, per="replica",
                             lr_help="learning rate (before --scale-lr); LARS needs about 0.1-10",
                             scale_lr_help="scale the learning rate with the number of replicas N by the "
                             "course's rule per optimizer: x N for sgd and lars, x sqrt(N) for adam and lamb "
                             "(course_lib.training.schedules.scaled_lr; notebooks 03 and 04)")
    parser.add_argument("--plateau", action="store_true",
                        help="halve the learning rate when the loss stops improving")
    parser.add_argument("--optimizer", choices=flags.OPTIMIZERS, default="adam",
                        help="adam, sgd (momentum 0.9), lars or lamb (course_lib.training.optimizers)")
    flags.add_data_flags(parser)
    flags.add_run_flags(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train, evaluate, print the results; returns the exit status."""
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    from course_lib.training import (consumption, data, devices, models, optimizers, pipeline,
                                     report, seeding)
    from course_lib.training.callbacks import ReportConsumed, Throughput

    # Strategy: create the logical devices BEFORE anything else touches TensorFlow.
    names = devices.simulate_devices(args.devices) if args.devices else None

    from course_lib.training.keras2 import keras
    import tensorflow as tf

    seeding.configure(args.seed, deterministic=args.deterministic, resumable_dropout=False)
    strategy = tf.distribute.MirroredStrategy(names)  # Strategy: one replica per device
    replicas = strategy.num_replicas_in_sync  # Strategy: the "workers" of this run
    print(f"MirroredStrategy over {replicas} replica(s): {list(strategy.extended.worker_devices)}",
          flush=True)

    fmnist = data.load_arrays(train_subset=args.train_subset, test_subset=args.test_subset,
                              data_dir=args.data_dir)
    n_train = len(fmnist.y_train)
    # Strategy: the dataset yields GLOBAL batches (per-replica x replicas), split per replica.
    consumed = consumption.ConsumedIds()  # the ids of every global batch the strategy pulls
    train, global_batch, steps = pipeline.distribute_for_strategy(
        strategy, fmnist.x_train, fmnist.y_train, batch_size_per_replica=args.batch_size,
        training=True, seed=args.seed, epochs=args.epochs, recorder=consumed)
    # One process feeds all replicas: the epoch of one reader that splits each step batch.
    plan = epochs.EpochPlan(n_train, args.batch_size, replicas, one_reader=True)
    # Strategy: optional LR scaling (--scale-lr) by the course's rule per optimizer, the one function every
    # course script calls: x replicas for SGD and LARS, x sqrt(replicas) for Adam and LAMB (notebooks 03, 04).
    lr = learning_rate(args, replicas)
    report.report_config(
        plan=plan, script="mirrored_fmnist.py", strategy="mirrored", epochs=args.epochs, first_epoch=1,
        lr=lr, json_lines=args.json, base_lr=args.lr, scale_lr=args.scale_lr,
        optimizer=args.optimizer, seed=args.seed, deterministic=args.deterministic)

    with strategy.scope():  # Strategy: variables created here are mirrored on every replica
        model = models.build_model(seed=args.seed, mixed_precision=args.mixed_precision)
        optimizer = optimizers.get_optimizer(args.optimizer, lr)
        models.compile_model(model, optimizer)

    # Each epoch is timed from the end of its first step, as every course script is (notebook 07).
    meter = Throughput(plan.step_batch, samples_per_epoch=plan.samples_per_epoch,
                       warmup_epochs=args.throughput_warmup_epochs, warmup_steps=1, workers=replicas,
                       json_lines=args.json)
    # One reader (rank 0) feeds all replicas: it reports the ids of the global batches.
    callbacks = [meter, ReportConsumed(consumed, 0, json_lines=args.json)]
    if args.plateau:
        callbacks.insert(0, keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5,
                                                                 patience=1, verbose=1))
    model.fit(train, epochs=args.epochs, steps_per_epoch=steps, callbacks=callbacks,
              verbose=0 if args.json else 2)

    test = pipeline.make_dataset(fmnist.x_test, fmnist.y_test, batch_size=global_batch,
                                 training=False)
    report.report_result(scores=model.evaluate(test, verbose=0), plan=plan, meter=meter, strategy="mirrored",
                         epochs=args.epochs, epochs_run=args.epochs, started=started, json_lines=args.json)
    digest = models.weights_digest(model)
    print(f"weights digest {digest}", flush=True)
    emit("digest", args.json, rank=0, digest=digest)
    return 0


def learning_rate(args: argparse.Namespace, replicas: int) -> float:
    """The rate the optimizer starts from: ``--lr``, or with ``--scale-lr`` the course's rule for ``--optimizer``
    at ``replicas`` replicas (:func:`course_lib.training.schedules.scaled_lr`)."""
    return schedules.scaled_lr(args.optimizer, args.lr, replicas) if args.scale_lr else args.lr


if __name__ == "__main__":
    sys.exit(main())
