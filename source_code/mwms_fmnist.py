"""tf.distribute.MultiWorkerMirroredStrategy training of the course CNN on Fashion-MNIST.

Description: several worker processes (one per host, or several on one machine) each drive
their own devices; TensorFlow's collective all-reduce averages the gradients, and BackupAndRestore
lets a restarted job continue from the last finished epoch.

How to run: start one process per worker, each with its own ``TF_CONFIG`` (same cluster, its
own index); from a notebook, ``course_lib.runner.multiworker.run_workers`` does it::

    TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:12346"]},
                "task": {"type": "worker", "index": 0}}' \
        python source_code/mwms_fmnist.py --epochs 2 --train-subset 1024 &
    TF_CONFIG='{... "index": 1}}' python source_code/mwms_fmnist.py --epochs 2 --train-subset 1024

Without TF_CONFIG it runs as one worker. The distributed lines are marked ``# Strategy:``. With
``--json`` worker 0 (the chief) prints the JSON lines of docs/architecture.md (``strategy`` =
``"multiworker"``), and every worker prints its ``worker`` and ``digest`` events.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from course_lib.training.events import emit
from course_lib.training.flags import (HelpFormatter, add_data_flags, add_run_flags, add_training_flags,
                                      add_worker_flags, positive_float)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the flags and TF_CONFIG; every bad input exits here, before TensorFlow."""
    parser = argparse.ArgumentParser(
        description="Train the course CNN on Fashion-MNIST with MultiWorkerMirroredStrategy (one "
        "process per worker, configured by TF_CONFIG). One epoch = one pass over the training set "
        "by all workers together.",
        epilog="example: TF_CONFIG=... python source_code/mwms_fmnist.py --epochs 2 "
        "--train-subset 1024 (one process per worker; see the module docstring)",
        formatter_class=HelpFormatter)
    add_training_flags(parser, batch_size=64, epochs=2)
    add_data_flags(parser)
    add_worker_flags(parser)
    parser.add_argument("--backup-dir", default=None,
                        help="BackupAndRestore folder: the state is backed up after every epoch, "
                        "and a run started again with the same folder continues from there")
    parser.add_argument("--collective-timeout", type=positive_float, default=300.0,
                        help="seconds one collective may wait for a peer before it fails (the "
                        "first one waits for the slowest worker to start); a DEAD peer is noticed "
                        "sooner, by the coordination service's heartbeat")
    add_run_flags(parser, precision=False)
    args = parser.parse_args(argv)
    args.index, args.workers = 0, 1
    raw = os.environ.get("TF_CONFIG")
    if raw:
        try:
            config = json.loads(raw)
            args.workers = len(config["cluster"]["worker"])
            args.index = int(config["task"]["index"])
        except (ValueError, KeyError, TypeError) as exc:
            parser.error(f"TF_CONFIG is not a worker cluster ({exc!r}); expected "
                         '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", '
                         '"index": i}}')
        if not 0 <= args.index < args.workers:
            parser.error(f"TF_CONFIG task index {args.index} is outside 0..{args.workers - 1}")
    return args


def backed_up_epochs(backup_dir: str | None) -> int:
    """Epochs already finished according to BackupAndRestore's last backup (0 without one)."""
    import tensorflow as tf

    if not backup_dir:
        return 0
    latest = tf.train.latest_checkpoint(os.path.join(backup_dir, "chief"))
    if latest is None:
        return 0
    reader = tf.train.load_checkpoint(latest)
    return int(reader.get_tensor("ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE")) + 1


def main(argv: list[str] | None = None) -> int:
    """Train, evaluate, print the results; returns the exit status."""
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    from course_lib.training import data, devices, epochs, models, optimizers, pipeline, report, seeding
    from course_lib.training.callbacks import Throughput

    # Strategy: the workers of this run (TF_CONFIG) share the machine; each gets its own cores (the
    # launcher's grant, else free cores it claims), as many threads as it has cores.
    workers = len(json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {}).get("worker", [])) or 1
    devices.configure_worker(0, threads_per_worker=args.threads_per_worker, local_size=workers)

    from course_lib.training.keras2 import keras
    import tensorflow as tf

    # Strategy: create it BEFORE any other TensorFlow op; it reads TF_CONFIG and starts this
    # worker's gRPC server. The timeout turns a missing peer into an error instead of a hang.
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=args.collective_timeout))
    workers = strategy.num_replicas_in_sync  # Strategy: one replica per worker on CPUs
    chief = args.index == 0  # Strategy: worker 0 is the chief; it alone reports
    emit("worker", args.json, rank=args.index, size=args.workers, pid=os.getpid(),
         host=os.uname().nodename)
    seeding.configure(args.seed)

    fmnist = data.load_arrays(train_subset=args.train_subset, test_subset=args.test_subset,
                              data_dir=args.data_dir)
    n_train = len(fmnist.y_train)
    plan = epochs.EpochPlan(n_train, args.batch_size, workers)
    steps = plan.steps_per_epoch
    lr = args.lr * workers if args.scale_lr else args.lr
    first = backed_up_epochs(args.backup_dir)
    if first >= args.epochs:
        print(f"error: the backup in {args.backup_dir} already holds {first} epochs; pass "
              f"--epochs larger than that or a fresh --backup-dir", file=sys.stderr, flush=True)
        return 2
    if chief:
        report.report_config(
            plan=plan, script="mwms_fmnist.py", strategy="multiworker", epochs=args.epochs,
            first_epoch=first + 1, lr=lr, json_lines=args.json,
            headline=f"MultiWorkerMirroredStrategy: {workers} worker(s), lr {lr:g}, epochs {first + 1}..{args.epochs}",
            base_lr=args.lr, scale_lr=args.scale_lr, optimizer="adam", seed=args.seed, deterministic=False)

    def dataset_fn(context: "tf.distribute.InputContext") -> "tf.data.Dataset":
        # Strategy: each worker builds its own shard (positions r, r+W, ...) of each epoch's
        # order, which depends only on (seed, epoch): a resumed run sees the same batches.
        return pipeline.make_epochs_dataset(
            fmnist.x_train, fmnist.y_train, batch_size=args.batch_size, seed=args.seed,
            num_workers=context.num_input_pipelines, worker_index=context.input_pipeline_id,
            first_epoch=first, last_epoch=args.epochs)

    train = strategy.distribute_datasets_from_function(dataset_fn)  # Strategy: per-worker input
    with strategy.scope():  # Strategy: variables are mirrored on every worker
        model = models.build_model(seed=args.seed)
        models.compile_model(model, optimizers.get_optimizer("adam", lr))

    class ResumeReport(keras.callbacks.Callback):
        """After BackupAndRestore restored the state: say from where the run continues."""

        def on_train_begin(self, logs: dict | None = None) -> None:
            digest = models.weights_digest(model)
            if first and chief:
                print(f"Resumed from the backup in {args.backup_dir} after epoch {first}",
                      flush=True)
                emit("resume", args.json, epoch=first, digest=digest, path=args.backup_dir)

    callbacks: list = []
    if args.backup_dir:
        # Strategy: fault tolerance; every worker takes part, the chief writes the backup.
        callbacks += [keras.callbacks.BackupAndRestore(backup_dir=args.backup_dir),
                      ResumeReport()]
    callbacks += [
        keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: seeding.reseed_dropout(model, args.seed, epoch)),
        Throughput(plan.step_batch, samples_per_epoch=plan.samples_per_epoch,
                   warmup_epochs=args.throughput_warmup_epochs, workers=workers,
                   rank=args.index, json_lines=args.json),
    ]
    meter = callbacks[-1]
    model.fit(train, epochs=args.epochs, steps_per_epoch=steps, callbacks=callbacks, verbose=0)

    test = tf.data.Dataset.from_tensor_slices(
        (fmnist.x_test[..., None].astype("float32") / 255.0, fmnist.y_test.astype("int32")))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    test = test.batch(256).with_options(options)
    # Strategy: every worker evaluates its part; the metrics are combined across workers.
    scores = model.evaluate(test, verbose=0)
    digest = models.weights_digest(model)
    if chief:
        report.report_result(scores=scores, plan=plan, meter=meter, strategy="multiworker", epochs=args.epochs,
                             epochs_run=args.epochs - first, started=started, json_lines=args.json,
                             headline="Test accuracy {acc:.4f}, loss {loss:.4f}; wall time {wall:.1f} s")
    emit("digest", args.json, rank=args.index, digest=digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
