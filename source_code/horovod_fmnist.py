"""Horovod data-parallel training of the course CNN on Fashion-MNIST.

Every worker process trains the same model on its own shard of the real Fashion-MNIST training
set; Horovod averages the gradients of all workers at every step (ring-allreduce), so all
workers keep identical weights.

How to run (2 workers on this machine, CPU or one GPU each)::

    horovodrun -np 2 --gloo python source_code/horovod_fmnist.py --epochs 1 --train-subset 6000

It also runs as a single worker without horovodrun: ``python source_code/horovod_fmnist.py``.
The lines that make a Keras script distributed are marked ``# Horovod:``. With ``--json``,
rank 0 prints the JSON lines of docs/architecture.md for ``course_lib.runner.launch``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

from course_lib.training import checkpoints, epochs, flags, schedules, seeding
from course_lib.training.events import emit
from course_lib.training.flags import non_negative_int, positive_int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the flags; every bad flag exits here, before TensorFlow starts."""
    parser = argparse.ArgumentParser(
        description="Train the course CNN on Fashion-MNIST with Horovod (one process per worker). "
        "One epoch = one pass over the training set by all workers together.",
        epilog="example: horovodrun -np 2 --gloo python source_code/horovod_fmnist.py --epochs 1 --train-subset 6000",
        formatter_class=flags.HelpFormatter)
    flags.add_training_flags(parser, batch_size=128, epochs=3,
                             lr_help="learning rate (before --scale-lr); LARS needs about 0.1-10",
                             scale_lr_help="scale the learning rate with the growth of the global batch over one "
                             "worker's batch, g = workers x --backward-passes-per-step, by the course's rule per "
                             "optimizer: x g for sgd and lars, x sqrt(g) for adam and lamb "
                             "(course_lib.training.schedules.scaled_lr; notebooks 03 and 04)")
    parser.add_argument("--warmup-epochs", type=non_negative_int, default=0,
                        help="ramp the learning rate from --lr (one worker's rate) up to the scaled rate "
                        "over this many epochs (Horovod's LearningRateWarmupCallback); needs --scale-lr and "
                        "must be < --epochs")
    parser.add_argument("--plateau", action="store_true",
                        help="halve the learning rate when the (worker-averaged) loss stops improving")
    parser.add_argument("--optimizer", choices=flags.OPTIMIZERS, default="adam",
                        help="adam, sgd (momentum 0.9), lars or lamb (course_lib.training.optimizers)")
    parser.add_argument("--backward-passes-per-step", type=positive_int, default=1,
                        help="gradient accumulation: average the gradients of this many batches "
                        "before each update (global batch = batch x workers x this)")
    flags.add_worker_flags(parser)
    parser.add_argument("--no-pin-cores", action="store_true",
                        help="CPU hosts: do not keep each worker on its own cores (a control; by "
                        "default each runs on the cores the launcher granted it, or on free cores "
                        "it claims)")
    flags.add_data_flags(parser)
    parser.add_argument("--eval-every-epoch", action="store_true",
                        help="rank 0 evaluates on the test set after every epoch and adds "
                        "test_loss, test_accuracy and wall_time_s (since start) to the epoch line")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="folder where rank 0 saves a checkpoint after every epoch")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the last complete epoch in --checkpoint-dir (any "
                        "number of workers: rank 0 restores, then broadcasts)")
    flags.add_run_flags(parser)
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="send gradients as float16 in the all-reduce (hvd.Compression.fp16; "
                        "pays on slow links between GPUs, not on one CPU host)")
    parser.add_argument("--no-distributed-optimizer", action="store_true",
                        help="CONTROL EXPERIMENT ONLY: skip hvd.DistributedOptimizer, so gradients "
                        "are NOT averaged and the workers' weights diverge")
    parser.add_argument("--step-digests", action="store_true",
                        help="CHECK ONLY: rank 0 prints the weights digest after every micro-step "
                        "(with --backward-passes-per-step k they change every k-th step)")
    parser.add_argument("--no-broadcast", action="store_true",
                        help="CONTROL EXPERIMENT ONLY: skip the initial broadcast of rank 0's "
                        "weights; with --seed-per-rank the workers start (and end) different")
    parser.add_argument("--seed-per-rank", action="store_true",
                        help="CONTROL EXPERIMENT ONLY: initialise each worker's weights from seed + "
                        "rank (the data order still uses --seed on every worker)")
    args = parser.parse_args(argv)
    if args.warmup_epochs and args.warmup_epochs >= args.epochs:
        parser.error(f"--warmup-epochs ({args.warmup_epochs}) must be smaller than --epochs "
                     f"({args.epochs}); lower it or train longer")
    if args.warmup_epochs and not args.scale_lr:
        parser.error("--warmup-epochs ramps the rate from --lr up to the scaled rate, so it needs --scale-lr "
                     "(without it the rate is --lr from the first step: drop --warmup-epochs)")
    if args.resume and not args.checkpoint_dir:
        parser.error("--resume needs --checkpoint-dir (the folder of the run to continue)")
    args.resume_from = None
    # Only rank 0 reads the checkpoint (other hosts may not see the folder); the launchers set
    # the rank in the environment before the script starts.
    launcher_rank = next((os.environ[v] for v in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK",
                                                   "PMI_RANK") if v in os.environ), "0")
    if args.resume and launcher_rank == "0":
        try:
            args.resume_from = checkpoints.find_latest_checkpoint(args.checkpoint_dir)
        except checkpoints.CheckpointError as exc:
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
    from course_lib.training.keras2 import keras  # Keras 2 (tf_keras), before Horovod's Keras layer loads
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.keras as hvd
    import tensorflow as tf

    from course_lib.training import (accumulation, autograph, callbacks, consumption, data, devices, models,
                                     optimizers, pipeline, report)
    from course_lib.training.machine import placement

    autograph.leave_horovod_unconverted()  # start-up: 2-3 s less per rank, the same graph (training/autograph.py)

    gpus = tf.config.list_physical_devices("GPU")  # lists devices without initialising them
    if not gpus:  # Horovod: on CPU hosts the background thread polls every 5 ms, not 1 ms (notebook 05)
        os.environ.setdefault("HOROVOD_CYCLE_TIME", "5")
    hvd.init()  # Horovod (1/5): join the workers horovodrun started (a group of 1 without it)
    # Horovod (2/5): one GPU, or one share of the cores, per process. Which one: the launcher's grant
    # (course_lib.runner), else a free one this rank claims; hvd.local_rank() alone would put two runs,
    # or two "hosts" of one machine, on the same core or GPU (notebooks 03 and 06).
    share = placement.worker_share(hvd.local_rank(), hvd.local_size(), gpus=len(gpus),
                                   threads=args.threads_per_worker, pin=not args.no_pin_cores)
    if gpus:  # Horovod (2/5): this process sees only its GPU, as /gpu:0
        gpu = gpus[share.gpu_index]
        tf.config.set_visible_devices(gpu, "GPU")
        tf.config.experimental.set_memory_growth(gpu, True)
    else:  # Horovod (2/5), CPU: as many threads as the worker has cores, and it keeps to them
        devices.set_cpu_threads(share.threads)
    threads = share.threads
    rank, workers, k = hvd.rank(), hvd.size(), args.backward_passes_per_step
    # Horovod: a control only: --seed-per-rank gives each worker its own initial weights.
    model_seed = args.seed + rank if args.seed_per_rank else args.seed
    seeding.configure(model_seed, deterministic=args.deterministic)

    fmnist = data.load_arrays(train_subset=args.train_subset, test_subset=args.test_subset,
                              data_dir=args.data_dir)
    n_train = len(fmnist.y_train)
    plan = epochs.EpochPlan(n_train, args.batch_size, workers, k)
    steps = plan.steps_per_epoch
    growth = workers * k  # the global batch is this many times one worker's batch
    # Horovod (3/5): scale the LR (optional, --scale-lr) by the course's rule per optimizer, the one
    # function every course script calls: linearly with the growth for SGD and LARS, by its square root
    # for Adam and LAMB (notebook 03 states the rule, notebook 04 measures it).
    lr = learning_rate(args, growth)
    # Horovod: every worker starts at rank 0's epoch (only rank 0 read the checkpoint).
    start_epoch = int(hvd_tf.broadcast_object(
        args.resume_from["epoch"] if args.resume_from else 0, root_rank=0))
    if rank == 0:  # Horovod: rank 0 alone prints
        report.report_config(
            plan=plan, script="horovod_fmnist.py", strategy="horovod", epochs=args.epochs,
            first_epoch=start_epoch + 1, lr=lr, json_lines=args.json,
            base_lr=args.lr, scale_lr=args.scale_lr, optimizer=args.optimizer,
            warmup_epochs=args.warmup_epochs, plateau=args.plateau, seed=args.seed,
            eval_every_epoch=args.eval_every_epoch, deterministic=args.deterministic,
            distributed_optimizer=not args.no_distributed_optimizer,
            fp16_allreduce=args.fp16_allreduce, broadcast=not args.no_broadcast,
            seed_per_rank=args.seed_per_rank, cpu_cores=list(share.cpus), placement=share.source)

    model = models.build_model(seed=model_seed, mixed_precision=args.mixed_precision)
    optimizer = optimizers.get_optimizer(args.optimizer, lr)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    if k == 1 and not args.no_distributed_optimizer:  # Horovod (4/5): average the gradients of
        optimizer = hvd.DistributedOptimizer(optimizer, compression=compression)  # all workers
    if args.mixed_precision:
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    models.compile_model(model, optimizer)
    optimizer.build(model.trainable_variables)  # slots exist before restore and broadcast
    if k > 1:  # Horovod (4/5) with accumulation: sum k batches, then average them and the workers
        # once per update (course code: Horovod's own backward_passes_per_step would advance
        # optimizer.iterations k times per update, which Adam's and LAMB's bias correction read).
        accumulation.accumulate_gradients(model, k, all_reduce=None if args.no_distributed_optimizer
                                          else lambda grads: hvd_tf.grouped_allreduce(
                                              grads, op=hvd_tf.Average, compression=compression))
    if args.resume and rank == 0:
        digest = checkpoints.restore_checkpoint(args.resume_from, model=model, optimizer=optimizer)
        print(f"Resumed from {args.resume_from['path']} after epoch {start_epoch}", flush=True)
        emit("resume", args.json, epoch=start_epoch, digest=digest, path=args.resume_from["path"])
    # Horovod (5/5): every worker starts from rank 0's weights and optimizer state. One broadcast,
    # BEFORE the first step: after a resume only rank 0 holds the trained state (Keras'
    # BroadcastGlobalVariablesCallback would broadcast only after the first step).
    if not args.no_broadcast:  # Horovod: --no-broadcast skips it (a control experiment only)
        hvd_tf.broadcast_variables(model.variables + optimizer.variables(), root_rank=0)

    test = pipeline.make_dataset(fmnist.x_test, fmnist.y_test, batch_size=256, training=False)
    # Each epoch is timed from the end of its first step (the step that starts the epoch's input pipeline), as
    # every course script is (notebook 07 compares four of them on one window).
    meter = callbacks.Throughput(plan.step_batch, samples_per_epoch=plan.samples_per_epoch,
                                 warmup_epochs=args.throughput_warmup_epochs, warmup_steps=1, workers=workers,
                                 rank=rank, json_lines=args.json,
                                 # the cores this worker should keep busy: judges a disturbed epoch
                                 expected_cpus=None if gpus else threads)
    steps_callbacks = [hvd.callbacks.MetricAverageCallback(),  # Horovod: average logged metrics
                       callbacks.ReseedDropout(args.seed),
                       *lr_callbacks(args, hvd, tf, lr, growth, steps, rank),
                       callbacks.FirstStepLearningRate()]  # the rate each epoch starts with, in its event
    if args.eval_every_epoch and rank == 0:  # after MetricAverageCallback: rank 0's keys only
        steps_callbacks.append(callbacks.EvaluateEachEpoch(test, started))
    steps_callbacks.append(meter)
    if args.step_digests and rank == 0:
        steps_callbacks.append(callbacks.StepDigests(json_lines=args.json))
    if args.checkpoint_dir and rank == 0:  # Horovod: checkpoints on rank 0 only
        steps_callbacks.append(callbacks.CheckpointEachEpoch(
            args.checkpoint_dir, optimizer, json_lines=args.json,
            extra={"workers": workers, "seed": args.seed}))
    # Horovod: each worker reads its own shard; the order depends only on (seed, epoch).
    consumed = consumption.ConsumedIds()  # the ids this worker trains on, per epoch
    train = pipeline.make_epochs_dataset(fmnist.x_train, fmnist.y_train, batch_size=args.batch_size,
                                         seed=args.seed, num_workers=workers, worker_index=rank,
                                         first_epoch=start_epoch, last_epoch=args.epochs,
                                         recorder=consumed)
    # Horovod: every rank reports which examples it trained on (the `consumed` event).
    steps_callbacks.append(callbacks.ReportConsumed(consumed, rank, json_lines=args.json))
    model.fit(train, epochs=args.epochs, initial_epoch=start_epoch, steps_per_epoch=steps,
              callbacks=steps_callbacks, verbose=2 if rank == 0 and not args.json else 0)

    digest = models.weights_digest(model)
    if rank == 0:  # Horovod: evaluate and report on rank 0 only
        report.report_result(scores=model.evaluate(test, verbose=0), plan=plan, meter=meter,
                             strategy="horovod", epochs=args.epochs, epochs_run=args.epochs - start_epoch,
                             started=started, json_lines=args.json)
    print(f"rank {rank} weights digest {digest}", flush=True)
    emit("digest", args.json, rank=rank, digest=digest)
    return 0


def learning_rate(args: argparse.Namespace, growth: int) -> float:
    """The rate the optimizer starts from: ``--lr``, or with ``--scale-lr`` the course's rule for ``--optimizer``
    at a global batch ``growth`` times one worker's (:func:`course_lib.training.schedules.scaled_lr`)."""
    return schedules.scaled_lr(args.optimizer, args.lr, growth) if args.scale_lr else args.lr


def lr_callbacks(args: argparse.Namespace, hvd: Any, tf: Any, lr: float, growth: int, steps: int,
                 rank: int) -> list[Any]:
    """The learning-rate schedule callbacks that ``--warmup-epochs`` and ``--plateau`` ask for."""
    from course_lib.training.keras2 import keras

    found: list[Any] = []
    factor = lr / args.lr  # how much --scale-lr multiplied the rate: growth (sgd, lars) or sqrt(growth) (adam, lamb)
    # Horovod's warm-up ramps from initial_lr / size up to initial_lr: with the rate scaled linearly by the
    # workers it starts at --lr, one worker's rate (tests/test_scripts.py checks the first step's rate).
    if args.warmup_epochs and args.backward_passes_per_step == 1 and math.isclose(factor, growth):
        found.append(hvd.callbacks.LearningRateWarmupCallback(  # Horovod: LR warm-up
            initial_lr=lr, warmup_epochs=args.warmup_epochs, momentum_correction=False,
            steps_per_epoch=steps, verbose=int(rank == 0)))
    elif args.warmup_epochs:  # the same ramp, from lr / factor = --lr: accumulation, or Adam's sqrt rule
        found.append(hvd.callbacks.LearningRateScheduleCallback(  # Horovod: LR warm-up
            initial_lr=lr, multiplier=schedules.warmup_multiplier(factor, args.warmup_epochs, steps),
            start_epoch=0, end_epoch=args.warmup_epochs, staircase=False,
            momentum_correction=False, steps_per_epoch=steps))
    if args.plateau:
        found.append(keras.callbacks.ReduceLROnPlateau(
            monitor="loss", factor=0.5, patience=1, verbose=int(rank == 0)))
    return found


if __name__ == "__main__":
    sys.exit(main())
