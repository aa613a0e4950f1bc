"""Tiny Horovod training script for the launcher tests (random data, 2-layer model).

Accepts the flags of source_code/horovod_fmnist.py that the launcher and the control panel
pass (--batch-size, --epochs, --train-subset, --json) and prints the JSON lines of
docs/architecture.md. Extra test flags: --wait-for FILE (every rank waits, after rank 0 printed
its config line, until FILE exists: proves that output is streamed while the run goes on),
--marker TEXT (ignored; lets a test find the run's processes).
"""

import hashlib
import os
import sys
import time

from panel_flags import emit, panel_parser

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from course_lib.training.keras2 import keras
import tensorflow as tf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402


def main():
    parser = panel_parser()
    parser.add_argument("--wait-for", default=None)
    args = parser.parse_args()

    hvd.init()
    # Two ranks share two cores with everything else: one TF thread each avoids thrashing.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(1234 + hvd.rank())  # different start: the broadcast matters
    rng = np.random.default_rng(hvd.rank())
    n = args.train_subset // hvd.size()
    x = rng.normal(size=(n, 16)).astype("float32")
    y = rng.integers(0, 10, size=n)
    global_batch = args.batch_size * hvd.size()
    steps = max(1, args.train_subset // global_batch)
    if hvd.rank() == 0:
        print(f"tiny_hvd: {hvd.size()} workers, {steps} steps per epoch", flush=True)
        emit(args, "config", script="tiny_hvd.py", strategy="horovod", workers=hvd.size(),
             per_worker_batch=args.batch_size, global_batch=global_batch,
             train_size=args.train_subset, steps_per_epoch=steps,
             samples_per_epoch=steps * global_batch, epochs=args.epochs, lr=0.01,
             optimizer="SGD", backward_passes_per_step=1)
    if args.wait_for:
        deadline = time.monotonic() + 120
        while not os.path.exists(args.wait_for):
            if time.monotonic() > deadline:
                sys.exit(f"tiny_hvd: {args.wait_for} never appeared: output is not streamed")
            time.sleep(0.05)

    model = keras.Sequential([keras.layers.Dense(32, activation="relu", input_shape=(16,)),
                                 keras.layers.Dense(10)])
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01))
    model.compile(opt, keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    rates = []

    class Report(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            dt = time.perf_counter() - self.t0
            rates.append(steps * global_batch / dt)
            if hvd.rank() == 0:
                emit(args, "epoch", epoch=epoch + 1, steps=steps, samples=steps * global_batch,
                     epoch_time_s=dt, images_per_sec=rates[-1],
                     **{k: float(v) for k, v in (logs or {}).items()})

    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(args.batch_size)
    model.fit(ds, steps_per_epoch=steps, epochs=args.epochs, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), Report()])
    if hvd.rank() == 0:
        ips = float(np.mean(rates[1:] if len(rates) > 1 else rates))
        emit(args, "result", workers=hvd.size(), per_worker_batch=args.batch_size,
             global_batch=global_batch, images_per_sec=ips, images_per_sec_ci95=0.0,
             per_worker_images_per_sec=ips / hvd.size(), epochs=args.epochs,
             total_steps=steps * args.epochs, test_loss=None, test_accuracy=None,
             wall_time_s=None, strategy="horovod")
    digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()
    emit(args, "digest", rank=hvd.rank(), digest=digest)


if __name__ == "__main__":
    main()
