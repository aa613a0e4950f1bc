"""Horovod data-parallel training of the course CNN on Fashion-MNIST.

Every worker process trains the same model on its own shard of the real Fashion-MNIST training
set; Horovod averages the gradients of all workers at every step (ring-allreduce), so all
workers keep identical weights.

How to run (2 workers on this machine, CPU or one GPU each)::

    horovodrun -np 2 --gloo python source_code/horovod_fmnist.py --epochs 1 --train-subset 6000

It also runs as a single worker without horovodrun: ``python source_code/horovod_fmnist.py``.
The lines that make a Keras script distributed are marked ``# Horovod:``. With ``--json``,
rank 0 prints the JSON lines of docs/architecture.md for ``course_lib.launch``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from course_lib import ablation, training
from course_lib.training import emit, non_negative_int, positive_float, positive_int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the flags; every bad flag exits here, before TensorFlow starts."""
    parser = argparse.ArgumentParser(
        description="Train the course CNN on Fashion-MNIST with Horovod (one process per worker). "
        "One epoch = one pass over the training set by all workers together.",
        epilog="example: horovodrun -np 2 --gloo python source_code/horovod_fmnist.py --epochs 1 --train-subset 6000",
        formatter_class=training.HelpFormatter)
    parser.add_argument("--batch-size", type=positive_int, default=128,
                        help="batch size PER WORKER; the global batch is this x workers")
    parser.add_argument("--epochs", type=positive_int, default=3,
                        help="total epochs (passes over the training set by all workers together)")
    parser.add_argument("--lr", type=positive_float, default=1e-3,
                        help="learning rate (before --scale-lr); LARS needs about 0.1-10")
    parser.add_argument("--scale-lr", action="store_true",
                        help="multiply the learning rate by the growth of the global batch over one "
                        "worker's batch: workers x --backward-passes-per-step (linear scaling)")
    parser.add_argument("--warmup-epochs", type=non_negative_int, default=0,
                        help="ramp the learning rate from lr/(workers x backward passes) up to lr over "
                        "this many epochs (Horovod LearningRateWarmupCallback); must be < --epochs")
    parser.add_argument("--plateau", action="store_true",
                        help="halve the learning rate when the (worker-averaged) loss stops improving")
    parser.add_argument("--optimizer", choices=training.OPTIMIZERS, default="adam",
                        help="adam, sgd (momentum 0.9), lars or lamb (course_lib.optimizers)")
    parser.add_argument("--backward-passes-per-step", type=positive_int, default=1,
                        help="gradient accumulation: average the gradients of this many batches "
                        "before each update (global batch = batch x workers x this)")
    parser.add_argument("--threads-per-worker", type=positive_int, default=None,
                        help="CPU threads of each worker (default: cores / workers on the host)")
    parser.add_argument("--train-subset", type=positive_int, default=None,
                        help="train on the first N training images only (default: all 60000)")
    parser.add_argument("--test-subset", type=positive_int, default=None,
                        help="evaluate on the first N test images only (default: all 10000)")
    parser.add_argument("--eval-every-epoch", action="store_true",
                        help="rank 0 evaluates on the test set after every epoch and adds "
                        "test_loss, test_accuracy and wall_time_s (since start) to the epoch line")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="folder where rank 0 saves a checkpoint after every epoch")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the last complete epoch in --checkpoint-dir (any "
                        "number of workers: rank 0 restores, then broadcasts)")
    parser.add_argument("--seed", type=int, default=42,
                        help="seed of the weights, the data order and dropout")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="compute in float16 (mixed_float16; useful on GPUs only)")
    parser.add_argument("--deterministic", action="store_true",
                        help="enable TensorFlow op determinism (bit-identical reruns, slower)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON lines (config, epoch, checkpoint, result, digest)")
    parser.add_argument("--throughput-warmup-epochs", type=non_negative_int, default=1,
                        help="first epochs left out of the images/s mean (tracing, caches)")
    parser.add_argument("--no-distributed-optimizer", action="store_true",
                        help="CONTROL EXPERIMENT ONLY: skip hvd.DistributedOptimizer, so gradients "
                        "are NOT averaged and the workers' weights diverge")
    args = parser.parse_args(argv)
    if args.warmup_epochs and args.warmup_epochs >= args.epochs:
        parser.error(f"--warmup-epochs ({args.warmup_epochs}) must be smaller than --epochs "
                     f"({args.epochs}); lower it or train longer")
    if args.resume and not args.checkpoint_dir:
        parser.error("--resume needs --checkpoint-dir (the folder of the run to continue)")
    args.resume_from = None
    # Only rank 0 reads the checkpoint (other hosts may not see the folder); the launchers set
    # the rank in the environment before the script starts.
    launcher_rank = next((os.environ[v] for v in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK",
                                                   "PMI_RANK") if v in os.environ), "0")
    if args.resume and launcher_rank == "0":
        try:
            args.resume_from = training.find_latest_checkpoint(args.checkpoint_dir)
        except training.CheckpointError as exc:
            parser.error(f"--resume: {exc}")
        if args.resume_from["epoch"] >= args.epochs:
            parser.error(f"--resume: the checkpoint already holds {args.resume_from['epoch']} "
                         f"epochs; pass --epochs larger than that")
    return args


def main(argv: list[str] | None = None) -> int:
    """Train, evaluate, print the results; returns the exit status."""
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.keras as hvd

    from course_lib import data, devices, models, optimizers
    from course_lib.callbacks import Throughput

    if not devices.gpu_names():
        # Horovod: on CPU-only hosts, let the background thread negotiate every 5 ms instead of 1 ms:
        # its polling otherwise takes compute from the cores the workers share (benchmarks/,
        # section 1: 2 workers went from 0.87 to 0.94 of the machine's ceiling). Set it yourself to
        # override.
        os.environ.setdefault("HOROVOD_CYCLE_TIME", "5")
    hvd.init()  # Horovod: start the worker group (size 1 without horovodrun)
    # Horovod: pin one GPU per local rank (or share the CPU cores) before TF initialises.
    devices.configure_worker(hvd.local_rank(), threads_per_worker=args.threads_per_worker,
                             local_size=hvd.local_size())

    import tensorflow as tf

    rank, workers, k = hvd.rank(), hvd.size(), args.backward_passes_per_step
    if args.deterministic:
        tf.config.experimental.enable_op_determinism()
    tf.keras.utils.set_random_seed(args.seed)
    tf.keras.backend.experimental.enable_tf_random_generator()  # resumable dropout masks

    fmnist = data.load_arrays(train_subset=args.train_subset, test_subset=args.test_subset)
    n_train = len(fmnist.y_train)
    arith = training.epoch_arithmetic(n_train, args.batch_size, workers, k)
    steps = arith["steps_per_epoch"]
    # Horovod: optional linear LR scaling by the growth of the global batch (size x accumulation).
    growth = workers * k
    lr = args.lr * growth if args.scale_lr else args.lr
    # Horovod: every worker starts at rank 0's epoch (read from its checkpoint).
    start_epoch = int(hvd_tf.broadcast_object(args.resume_from["epoch"] if args.resume_from
                                              else 0, root_rank=0))
    if rank == 0:
        print(training.describe_epoch(arith, n_train, args.batch_size, workers, k), flush=True)
        print(f"{workers} worker(s), optimizer {args.optimizer}, lr {lr:g}, epochs "
              f"{start_epoch + 1}..{args.epochs}", flush=True)
        emit("config", args.json, script="horovod_fmnist.py", strategy="horovod", workers=workers,
             per_worker_batch=args.batch_size, global_batch=arith["global_batch"],
             step_batch=arith["step_batch"], train_size=n_train, steps_per_epoch=steps,
             samples_per_epoch=arith["samples_per_epoch"], updates_per_epoch=arith[
                 "updates_per_epoch"], epochs=args.epochs, first_epoch=start_epoch + 1, lr=lr,
             base_lr=args.lr, scale_lr=args.scale_lr, optimizer=args.optimizer,
             backward_passes_per_step=k, warmup_epochs=args.warmup_epochs, plateau=args.plateau,
             eval_every_epoch=args.eval_every_epoch, seed=args.seed,
             deterministic=args.deterministic,
             distributed_optimizer=not args.no_distributed_optimizer)

    model = models.build_model(seed=args.seed, mixed_precision=args.mixed_precision)
    optimizer = optimizers.get_optimizer(args.optimizer, lr)
    if not args.no_distributed_optimizer:
        # Horovod: average gradients across workers (and over k accumulated batches).
        optimizer = hvd.DistributedOptimizer(optimizer, backward_passes_per_step=k,
                                             average_aggregated_gradients=True)
    if args.mixed_precision:
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    models.compile_model(model, optimizer)
    optimizer.build(model.trainable_variables)  # slots exist before restore and broadcast

    if args.resume and rank == 0:
        digest = training.restore_checkpoint(args.resume_from, model=model, optimizer=optimizer)
        print(f"Resumed from {args.resume_from['path']} after epoch {start_epoch}", flush=True)
        emit("resume", args.json, epoch=start_epoch, digest=digest, path=args.resume_from["path"])
    # Horovod: identical start on every worker before the first step (matters after a restore).
    hvd_tf.broadcast_variables(model.variables, root_rank=0)
    hvd_tf.broadcast_variables(optimizer.variables(), root_rank=0)

    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # Horovod: rank 0's initial state
        hvd.callbacks.MetricAverageCallback(),  # Horovod: average the metrics over workers
        tf.keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: training.reseed_dropout(model, args.seed, epoch)),
    ]
    if args.warmup_epochs and k == 1:
        callbacks.append(hvd.callbacks.LearningRateWarmupCallback(  # Horovod: LR warm-up
            initial_lr=lr, warmup_epochs=args.warmup_epochs, momentum_correction=False,
            steps_per_epoch=steps, verbose=int(rank == 0)))
    elif args.warmup_epochs:  # the same ramp, from lr / (size x k): accumulation grows the batch too
        callbacks.append(hvd.callbacks.LearningRateScheduleCallback(
            initial_lr=lr, multiplier=ablation.warmup_multiplier(growth, args.warmup_epochs, steps),
            start_epoch=0, end_epoch=args.warmup_epochs, staircase=False,
            momentum_correction=False, steps_per_epoch=steps))
    if args.plateau:
        callbacks.append(tf.keras.callbacks.ReduceLROnPlateau(
            monitor="loss", factor=0.5, patience=1, verbose=int(rank == 0)))
    if args.eval_every_epoch and rank == 0:  # after MetricAverageCallback: rank 0's keys only
        test_every_epoch = data.make_dataset(fmnist.x_test, fmnist.y_test, batch_size=256,
                                             training=False)

        def evaluate(epoch: int, logs: dict | None) -> None:
            test_loss, test_acc = model.evaluate(test_every_epoch, verbose=0)
            if logs is not None:
                logs.update(test_loss=float(test_loss), test_accuracy=float(test_acc),
                            wall_time_s=time.perf_counter() - started)

        callbacks.append(tf.keras.callbacks.LambdaCallback(on_epoch_end=evaluate))
    meter = Throughput(arith["step_batch"], samples_per_epoch=arith["samples_per_epoch"],
                       warmup_epochs=args.throughput_warmup_epochs, workers=workers, rank=rank,
                       json_lines=args.json)
    callbacks.append(meter)
    if args.checkpoint_dir and rank == 0:  # Horovod: checkpoints on rank 0 only

        def save(epoch: int, logs: dict | None) -> None:
            info = training.save_checkpoint(
                args.checkpoint_dir, model=model, optimizer=optimizer, epoch=epoch + 1,
                digest=models.weights_digest(model), extra={"workers": workers, "seed": args.seed})
            emit("checkpoint", args.json, epoch=epoch + 1, path=info["path"], digest=info["digest"])

        callbacks.append(tf.keras.callbacks.LambdaCallback(on_epoch_end=save))

    # Horovod: each worker reads its own shard; the order depends only on (seed, epoch).
    train = data.make_epochs_dataset(fmnist.x_train, fmnist.y_train, batch_size=args.batch_size,
                                     seed=args.seed, num_workers=workers, worker_index=rank,
                                     first_epoch=start_epoch, last_epoch=args.epochs)
    model.fit(train, epochs=args.epochs, initial_epoch=start_epoch, steps_per_epoch=steps,
              callbacks=callbacks, verbose=2 if rank == 0 and not args.json else 0)

    digest = models.weights_digest(model)
    if rank == 0:  # Horovod: evaluate and report on rank 0 only
        test = data.make_dataset(fmnist.x_test, fmnist.y_test, batch_size=256, training=False)
        test_loss, test_acc = model.evaluate(test, verbose=0)
        summary = meter.summary()
        summary_json = summary.to_dict()  # NaN -> None (strict JSON)
        epochs_run = args.epochs - start_epoch
        wall = time.perf_counter() - started
        print(f"Test accuracy {test_acc:.4f}, loss {test_loss:.4f}; "
              f"{summary.images_per_sec_mean:.1f} images/s over {summary.epochs_counted} epoch(s) "
              f"({summary.per_worker_images_per_sec:.1f} per worker); wall time {wall:.1f} s",
              flush=True)
        emit("result", args.json, strategy="horovod", workers=workers,
             per_worker_batch=args.batch_size, global_batch=arith["global_batch"],
             images_per_sec=summary_json["images_per_sec_mean"],
             images_per_sec_ci95=summary_json["ci95"],
             per_worker_images_per_sec=summary_json["per_worker_images_per_sec"],
             epochs=args.epochs, epochs_run=epochs_run, total_steps=steps * epochs_run,
             test_loss=float(test_loss), test_accuracy=float(test_acc), wall_time_s=wall)
    print(f"rank {rank} weights digest {digest}", flush=True)
    emit("digest", args.json, rank=rank, digest=digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
