"""A custom GradientTape training loop of the course CNN on Fashion-MNIST, on ONE worker.

Your task (the assessment's code part): make it data-parallel with Horovod, so that the grader's launch at
2 workers (`run_horovod("tape_fmnist.py", [...], workers=2)`) trains one model on both workers together.
The places to change say `TODO(Horovod)`; keep every `emit(...)` and `report.*` line: the grader reads them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from course_lib.training import flags
from course_lib.training.events import emit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags the grader passes (it launches the script with the course's launcher)."""
    parser = argparse.ArgumentParser(description="Train the course CNN with a custom GradientTape loop.")
    flags.add_training_flags(parser, batch_size=64, epochs=2, lr_help="one worker's learning rate", scale_lr_help=None)
    parser.add_argument("--optimizer", choices=flags.OPTIMIZERS, default="adam")
    parser.add_argument("--checkpoint-dir", default=None, help="folder where checkpoints are saved after each epoch")
    flags.add_data_flags(parser)
    flags.add_run_flags(parser, precision=False, throughput=False)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train, evaluate, report; returns the exit status."""
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from course_lib.training.keras2 import keras  # Keras 2 (tf_keras), before Horovod loads
    import horovod.tensorflow as hvd  # noqa: F401  (Horovod's TensorFlow API: not used yet)
    import tensorflow as tf

    from course_lib.training import checkpoints, consumption, data, devices, epochs, models, optimizers, pipeline
    from course_lib.training import report, schedules, seeding  # noqa: F401  (schedules: not used yet)

    devices.set_cpu_threads(1)
    rank, workers = 0, 1  # TODO(Horovod): join the workers; this worker's rank and how many there are
    seeding.configure(args.seed)
    fmnist = data.load_arrays(train_subset=args.train_subset, test_subset=args.test_subset, data_dir=args.data_dir)
    plan = epochs.EpochPlan(len(fmnist.y_train), args.batch_size, workers, 1)
    lr = args.lr  # TODO(Horovod): the course's rule for the rate at a global batch `workers` times one worker's
    if rank == 0:
        report.report_config(plan=plan, script="tape_fmnist.py", strategy="horovod", epochs=args.epochs,
                             first_epoch=1, lr=lr, json_lines=args.json, base_lr=args.lr,
                             optimizer=args.optimizer, seed=args.seed)
    model = models.build_model(seed=args.seed)
    optimizer = optimizers.get_optimizer(args.optimizer, lr)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    consumed = consumption.ConsumedIds()
    # TODO(Horovod): each worker reads its own shard
    train = pipeline.make_epochs_dataset(fmnist.x_train, fmnist.y_train, batch_size=args.batch_size,
                                         seed=args.seed, num_workers=1, worker_index=0,
                                         first_epoch=0, last_epoch=args.epochs, recorder=consumed)
    test = pipeline.make_dataset(fmnist.x_test, fmnist.y_test, batch_size=256, training=False)

    @tf.function
    def train_step(images: tf.Tensor, labels: tf.Tensor, first_batch: bool) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # TODO(Horovod): average the gradients of all workers
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        # TODO(Horovod): after the first step, every worker starts from rank 0's weights and optimizer state
        return loss

    batches = iter(train)
    for epoch in range(args.epochs):
        epoch_start, total = time.perf_counter(), 0.0
        for step in range(plan.steps_per_epoch):
            images, labels = next(batches)
            total += float(train_step(images, labels, epoch == 0 and step == 0))
        if rank == 0:
            print(f"{plan.steps_per_epoch}/{plan.steps_per_epoch} - {time.perf_counter() - epoch_start:.0f}s - "
                  f"loss: {total / plan.steps_per_epoch:.4f}", flush=True)
        emit("consumed", args.json, **consumed.event(epoch, rank))
        if args.checkpoint_dir:  # TODO(Horovod): who saves the checkpoint?
            info = checkpoints.save_checkpoint(args.checkpoint_dir, model=model, optimizer=optimizer,
                                               epoch=epoch + 1, digest=models.weights_digest(model))
            emit("checkpoint", args.json, epoch=epoch + 1, path=info["path"], digest=info["digest"])
        emit("lr", args.json, rank=rank, epoch=epoch + 1, lr=float(keras.backend.get_value(optimizer.learning_rate)))

    if rank == 0:
        model.compile(loss=loss_fn, metrics=["accuracy"])
        report.report_result(scores=model.evaluate(test, verbose=0), plan=plan, strategy="horovod",
                             epochs=args.epochs, epochs_run=args.epochs, started=started, json_lines=args.json)
    digest = models.weights_digest(model)
    print(f"rank {rank} weights digest {digest}", flush=True)
    emit("digest", args.json, rank=rank, digest=digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
