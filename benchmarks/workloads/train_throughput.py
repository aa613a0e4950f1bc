"""One training-throughput measurement of the course CNN on real Fashion-MNIST, in one process.

Launched by benchmarks/run.py (plain ``python``, ``horovodrun -np N``, or with simulated CPU
devices for MirroredStrategy). The model, loss, optimizer and input pipeline are the course's own
(``course_lib.training.models``, ``course_lib.training.data``); only the thread settings and the strategy vary.

Measurement: one ``fit`` of ``--warmup-steps + --steps`` steps; the clock is read at the end of
every step, and images/s = ``steps * global_batch / (t[last] - t[last warm-up step])``. Rank 0
prints one JSON line ``{"event": "result", "images_per_sec": ..., "cpu": {...}, ...}``, where
``cpu`` is rank 0's CPU-clock window over the timed steps (``course_lib.training.cpuclock``:
expected cores = its intra-op threads, or cores / workers on this host without pinning).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def positive_int(text: str) -> int:
    """argparse type: an int >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the flags (bad flags exit before TensorFlow starts)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mode", choices=("single", "horovod", "mirrored"), required=True)
    parser.add_argument("--data", required=True, help=".npz with x_train, y_train (real FMNIST)")
    parser.add_argument("--batch", type=positive_int, default=128,
                        help="batch per worker (horovod) / per replica (mirrored) / per step")
    parser.add_argument("--devices", type=positive_int, default=1,
                        help="mirrored: simulated CPU devices (or GPUs) in the strategy")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="intra-op threads per process via course_lib.training.devices.configure_worker "
                        "(inter-op = 1); default: TensorFlow's own (no pinning)")
    parser.add_argument("--data-threads", type=positive_int, default=None,
                        help="private tf.data thread pool size (default: tf.data's shared pool)")
    parser.add_argument("--warmup-steps", type=positive_int, default=8)
    parser.add_argument("--steps", type=positive_int, default=60)
    parser.add_argument("--mixed-precision", action="store_true")
    parser.add_argument("--pin-core", action="store_true",
                        help="pin every thread of this process to core local_rank %% cores "
                        "(course_lib.training.devices.pin_cpu_cores, as the course script does)")
    parser.add_argument("--inter-op", type=positive_int, default=None,
                        help="inter-op threads (overrides configure_worker's 1)")
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="horovod: hvd.Compression.fp16 in the DistributedOptimizer")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the JSON result line; returns the exit status."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    from course_lib.training import devices, models, pipeline

    rank, workers, local_rank, local_size = 0, 1, 0, 1
    hvd = None
    if args.mode == "horovod":
        from course_lib.training.keras2 import keras  # noqa: F401  (Keras 2 before Horovod's Keras layer loads)
        import horovod.tensorflow.keras as hvd

        hvd.init()
        rank, workers = hvd.rank(), hvd.size()
        local_rank, local_size = hvd.local_rank(), hvd.local_size()
    names = None
    if args.mode == "mirrored":
        names = devices.simulate_devices(args.devices)
    if args.threads is not None:
        devices.configure_worker(local_rank, threads_per_worker=args.threads, local_size=local_size,
                                 pin=False)  # pinned or not is this workload's --pin-core, below
    if args.pin_core:
        devices.pin_cpu_cores(local_rank, 1)  # what source_code/horovod_fmnist.py does by default

    from course_lib.training.keras2 import keras
    import tensorflow as tf

    if args.inter_op is not None:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)

    from course_lib.training.cpuclock import CpuClock

    cores = len(os.sched_getaffinity(0))
    expected = float(args.threads) if args.threads else max(1.0, cores / local_size)
    if args.mode == "mirrored":
        expected = float(args.threads or cores)
    # The process (with the other ranks on this host) should keep every core busy, unless it
    # runs fewer threads than there are cores (Horovod -np 1 with 1 thread).
    cpu_clock = CpuClock(expected_cpus=expected, fills_machine=expected * local_size >= cores,
                         sample_every_s=0.5)

    arrays = np.load(args.data)
    x, y = arrays["x_train"], arrays["y_train"]
    strategy = tf.distribute.MirroredStrategy(names) if args.mode == "mirrored" else None
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    global_batch = args.batch * max(workers, replicas)

    ds = pipeline.make_dataset(x, y, batch_size=args.batch * replicas, training=True, seed=0,
                           num_workers=workers, worker_index=rank, cache=False).repeat()
    if args.data_threads is not None:
        options = tf.data.Options()
        options.threading.private_threadpool_size = args.data_threads
        ds = ds.with_options(options)

    def build() -> keras.Model:
        model = models.build_model(seed=0, mixed_precision=args.mixed_precision)
        optimizer = keras.optimizers.Adam(1e-3)
        if hvd is not None:
            compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
            optimizer = hvd.DistributedOptimizer(optimizer, compression=compression)
        if args.mixed_precision:
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        return models.compile_model(model, optimizer)

    if strategy is not None:
        ds = strategy.experimental_distribute_dataset(ds)
        with strategy.scope():
            model = build()
    else:
        model = build()

    stamps: list[float] = []

    class StepClock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            stamps.append(time.perf_counter())
            if len(stamps) == args.warmup_steps:
                cpu_clock.start()  # the timed steps only
            elif len(stamps) == args.warmup_steps + args.steps:
                cpu_clock.stop()   # before fit's iterator teardown (benchmarks/README.md)

    callbacks: list = [StepClock()]
    if hvd is not None:
        callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    total = args.warmup_steps + args.steps
    model.fit(ds, epochs=1, steps_per_epoch=total, callbacks=callbacks, verbose=0)
    if len(stamps) != total:
        raise RuntimeError(f"expected {total} step timestamps, got {len(stamps)}")
    window = cpu_clock.window
    elapsed = stamps[-1] - stamps[args.warmup_steps - 1]
    rate = args.steps * global_batch / elapsed
    if rank == 0:
        print(json.dumps({
            "event": "result", "mode": args.mode, "workers": max(workers, replicas),
            "per_worker_batch": args.batch, "global_batch": global_batch,
            "threads": args.threads, "steps": args.steps, "elapsed_s": elapsed,
            "images_per_sec": rate, "per_worker_images_per_sec": rate / max(workers, replicas),
            "step_time_ms": 1000.0 * elapsed / args.steps,
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            "mixed_precision": args.mixed_precision, "cpu": window.to_dict(),
        }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
