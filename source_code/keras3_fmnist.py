"""Keras 3 on JAX: the course CNN on Fashion-MNIST on one device, with no distribution at all.

Description: the starting point of notebook 07's Keras 3 section. ``jax_fmnist.py`` is this very script plus
the four ``keras.distribution`` changes; see them with
``diff source_code/keras3_fmnist.py source_code/jax_fmnist.py``. Same model shape and data order as the course
(each epoch one permutation drawn from (seed, epoch)). Needs keras 3, jax and NumPy, the course's
``course_lib.training`` (NumPy only) and the Fashion-MNIST files; no TensorFlow.

How to run::

    python source_code/keras3_fmnist.py --epochs 2 --train-subset 6000

``--json`` prints the course's JSON lines (config, epoch, consumed, result, digest).
"""

import argparse
import hashlib
import json
import math
import os
import time

import numpy as np

from course_lib.training.consumption import summarize_ids  # Course: the ids the one reader handed out
from course_lib.training.idx_arrays import load_idx_arrays
from course_lib.training.pipeline import epoch_indices
from course_lib.training.throughput import ThroughputMeter  # Course: the window every course script times


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=64, help="images per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--train-subset", type=int, default=60000, help="first N training images")
    parser.add_argument("--test-subset", type=int, default=10000, help="first N test images")
    parser.add_argument("--seed", type=int, default=42, help="seed of weights and data order")
    parser.add_argument("--json", action="store_true", help="print the course's JSON lines")
    parser.add_argument("--step-split", type=int, default=0, metavar="STEPS",
                        help="after training, time STEPS more steps of the jitted train step: compile, dispatch and "
                        "kernel time (notebook 07); 0: off")  # Course
    args = parser.parse_args()
    if args.step_split < 0:  # Course
        parser.error(f"--step-split must be at least 0, got {args.step_split}")  # Course
    for name in ("epochs", "batch_size", "train_subset", "test_subset"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    return args


def epoch_meter(keras, step_batch, samples, workers, json_lines):
    """The course's one epoch meter (course_lib.training.throughput) as a Keras 3 callback: every epoch timed from the
    end of its step 1 (fit's set-up before step 1 stays outside), the first epoch the warm-up, as the TF scripts."""
    class Meter(ThroughputMeter, keras.callbacks.Callback):  # not async-safe: Keras waits for each step before it
        pass

    return Meter(step_batch, samples_per_epoch=samples, warmup_steps=1, workers=workers, json_lines=json_lines,
                 keep_across_fits=True)


def step_split(keras, model, x, y, steps):
    """Where one step's time goes (Course, notebook 07): ``compile_ms`` (trace and XLA-compile Keras's train step
    once), then per step ``dispatch_ms`` (until the call returns: Python, Keras and JAX hand the step to XLA) and
    ``kernel_ms`` (from then until the results are ready: XLA:CPU's kernels run). One batch, already on the device."""
    import jax

    state = tuple([v.value for v in variables] for variables in (  # Keras 3's stateless train-step state
        model.trainable_variables, model.non_trainable_variables, model.optimizer.variables, model.metrics_variables))
    distribution = keras.distribution.distribution()  # None on one device; else each batch cut over the devices
    data = tuple(keras.distribution.distribute_tensor(a, distribution.get_data_layout(a.shape)) if distribution
                 else jax.device_put(a) for a in (x, y))
    began = time.perf_counter()
    compiled = jax.jit(model.train_step).lower(state, data).compile()
    compile_s, dispatch_s, kernel_s = time.perf_counter() - began, 0.0, 0.0
    for _ in range(steps):
        began = time.perf_counter()
        logs, state = compiled(state, data)
        returned = time.perf_counter()
        jax.block_until_ready((logs, state))
        dispatch_s, kernel_s = dispatch_s + returned - began, kernel_s + time.perf_counter() - returned
    return {"compile_ms": 1000 * compile_s, "dispatch_ms": 1000 * dispatch_s / steps,
            "kernel_ms": 1000 * kernel_s / steps, "steps": steps, "batch": len(x)}


def digests(model):
    """sha256 of every weight's bytes, in order: one per device that holds a copy."""
    per_device = {}
    for variable in model.weights:
        for shard in variable.value.addressable_shards:
            per_device.setdefault(shard.device.id, []).append(np.asarray(shard.data).tobytes())
    return {device: hashlib.sha256(b"".join(parts)).hexdigest() for device, parts in sorted(per_device.items())}


def main():
    args = parse_args()
    os.environ["KERAS_BACKEND"] = "jax"
    import keras

    emit = (lambda **e: print(json.dumps(e), flush=True)) if args.json else (lambda **e: None)
    keras.utils.set_random_seed(args.seed)
    devices = keras.distribution.list_devices()[:1]  # Course: the one device (named in the log)
    x_train, y_train, x_test, y_test = load_idx_arrays(args.train_subset, args.test_subset)
    n, replicas = len(x_train), len(devices)

    model = keras.Sequential([  # the course CNN (course_lib.training.models.build_model's layers), in Keras 3
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
    lr = args.lr
    model.compile(optimizer=keras.optimizers.Adam(lr), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    batch = args.batch_size
    steps = math.ceil(n / batch)
    print(f"{replicas} replica(s) on {[str(d) for d in devices]}, {n} images, per-replica batch {args.batch_size}, "
          f"global batch {batch}, {steps} steps per epoch, lr {lr:g}, epochs 1..{args.epochs}", flush=True)
    emit(event="config", script="keras3_fmnist.py", strategy="keras3", workers=replicas, readers=1, train_size=n,
         per_worker_batch=args.batch_size, global_batch=batch, steps_per_epoch=steps, epochs=args.epochs,
         first_epoch=1, lr=lr)

    images = x_train[..., None].astype("float32") / 255.0
    meter = epoch_meter(keras, batch, n, replicas, args.json)  # Course: its line and JSON epoch event per epoch
    for epoch in range(args.epochs):
        rows = epoch_indices(n, seed=args.seed, epoch=epoch)  # the course's order; one reader for all replicas
        x, y = images[rows], y_train[rows]
        history = model.fit(x, y, batch_size=batch, initial_epoch=epoch, epochs=epoch + 1, shuffle=False, verbose=0,
                            callbacks=[meter])
        emit(event="consumed", rank=0, epoch=epoch + 1, padding=0, **summarize_ids(rows))
        print(f"epoch {epoch + 1}: loss {history.history['loss'][-1]:.4f}", flush=True)

    if args.step_split:  # Course: compile, dispatch and kernel time of the step fit ran (notebook 07)
        split = step_split(keras, model, images[:batch], y_train[:batch], args.step_split)
        print(f"step split: compile {split['compile_ms']:.0f} ms once; per step dispatch {split['dispatch_ms']:.2f} ms, "
              f"kernels {split['kernel_ms']:.1f} ms", flush=True)
        emit(event="step_split", **split)

    loss, accuracy = model.evaluate(x_test[..., None].astype("float32") / 255.0, y_test, batch_size=256 * replicas,
                                    verbose=0)
    print(f"test accuracy {accuracy:.4f}", flush=True)
    emit(event="result", workers=replicas, test_accuracy=accuracy, test_loss=loss)
    for device, digest in digests(model).items():  # Course: the weights' digest
        emit(event="digest", rank=device, digest=digest)


if __name__ == "__main__":
    main()
