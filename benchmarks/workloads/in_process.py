"""Benchmarks that compare variants inside ONE process, interleaved (A, B, A, B, ...).

Sub-commands (each prints one JSON line ``{"event": "samples", "variants": {name: [...]}}``):

* ``prepare --out F.npz``: load the real Fashion-MNIST once (``course_lib.training.data.load_arrays``,
  verified) and save the training arrays for the other workloads (no event printed).
* ``callback``: seconds of ``fit(steps)`` without and with ``course_lib.training.callbacks.Throughput``, their
  order alternated round by round (A B, B A).
* ``pipeline``: images/s of the ``course_lib.training.data`` pipeline alone (iterating the batches) and
  of the model consuming it (``fit``).
* ``batches``: training images/s at several batch sizes (same number of images each).

All measurements use TensorFlow's default threading on the single CPU device (or GPU 0),
unless ``--intra``/``--inter`` set the pool sizes. Every timed ``fit`` is recorded with the CPU
clock (``course_lib.training.cpuclock``), from ``fit``'s start to the end of its last step (the
iterator's teardown after it is recorded apart, as ``teardown_s`` in the window); a round in which any of them was disturbed is re-run,
within a bound (``benchmarks/rounds.py``), and the event carries the windows (``cpu``) and the
counts (``rounds``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from course_lib.training.flags import positive_int  # noqa: E402  (after the path set-up)


def int_list(text: str) -> list[int]:
    """argparse type: comma-separated ints >= 1."""
    values = [positive_int(p) for p in text.split(",") if p.strip()]
    if not values:
        raise argparse.ArgumentTypeError("needs at least one value")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the sub-command and its flags."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare")
    prep.add_argument("--out", required=True)
    prep.add_argument("--train-subset", type=positive_int, default=None)
    for name in ("callback", "pipeline", "batches"):
        p = sub.add_parser(name)
        p.add_argument("--data", required=True)
        p.add_argument("--repeats", type=positive_int, default=5)
        p.add_argument("--steps", type=positive_int, default=40)
        p.add_argument("--batch", type=positive_int, default=128)
        p.add_argument("--batch-sizes", type=int_list, default=[32, 64, 128, 256, 512])
        p.add_argument("--images", type=positive_int, default=5120,
                       help="batches: images per measurement at every batch size")
        p.add_argument("--max-extra-rounds", type=int, default=None,
                       help="re-runs allowed for disturbed rounds (default: --repeats)")
        p.add_argument("--intra", type=positive_int, default=None, help="intra-op threads")
        p.add_argument("--inter", type=positive_int, default=None, help="inter-op threads")
    return parser.parse_args(argv)


def emit(**fields: object) -> None:
    """Print one JSON line."""
    print(json.dumps({"event": "samples", **fields}), flush=True)


def fit_steps_and_teardown(model: Any, ds: Any, steps: int, callbacks: Sequence[Any] = (),
                           cpu: Any = None) -> tuple[float, float]:
    """One ``fit(ds, steps)``: seconds up to the end of its last step, and of the teardown after it.

    The clock (and ``cpu``, a started :class:`course_lib.training.cpuclock.CpuClock`, if given)
    stops in ``on_train_end``: the tf.data iterator's teardown that follows can wait up to 2.6 s
    for the autotuner's thread, the factor-of-two mode of benchmarks/README.md.
    """
    from course_lib.training.keras2 import keras

    class StopAtTrainEnd(keras.callbacks.Callback):
        def on_train_end(self, logs: dict | None = None) -> None:
            self.end = time.perf_counter()
            if cpu is not None:
                cpu.stop()

    stopper = StopAtTrainEnd()
    start = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=steps, callbacks=[*callbacks, stopper], verbose=0)
    returned = time.perf_counter()
    return stopper.end - start, returned - stopper.end


def hook_seconds_per_step(model: Any, callbacks: Sequence[Any], steps: int = 20000) -> float:
    """Seconds per training step that Keras's callback hooks take with ``callbacks``, no compute around them.

    ``fit`` calls ``on_train_batch_begin`` and ``on_train_batch_end`` of a ``CallbackList`` once per step, with
    the step's logs (TensorFlow tensors); this drives the same list ``steps`` times in a tight loop.
    """
    import tensorflow as tf

    from course_lib.training.keras2 import keras

    logs = {"loss": tf.constant(0.5), "accuracy": tf.constant(0.9)}
    hooks = keras.callbacks.CallbackList(list(callbacks), add_history=False, add_progbar=False, model=model,
                                         epochs=1, steps=steps, verbose=0)
    hooks.on_train_begin()
    hooks.on_epoch_begin(0)
    start = time.perf_counter()
    for i in range(steps):
        hooks.on_train_batch_begin(i)
        hooks.on_train_batch_end(i, logs)
    seconds = (time.perf_counter() - start) / steps
    hooks.on_epoch_end(0, {})
    hooks.on_train_end()
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Run the sub-command; returns the exit status."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    from course_lib.training import data, models, pipeline

    if args.command == "prepare":
        arrays = data.load_arrays(train_subset=args.train_subset)
        tmp = args.out + ".partial.npz"
        np.savez(tmp, x_train=arrays.x_train, y_train=arrays.y_train)
        os.replace(tmp, args.out)
        return 0

    from course_lib.training.keras2 import keras
    import tensorflow as tf

    from benchmarks.rounds import collect_rounds
    from course_lib.training.callbacks import Throughput
    from course_lib.training.cpuclock import CpuClock

    if args.intra is not None:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra)
    if args.inter is not None:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter)

    arrays = np.load(args.data)
    x, y = arrays["x_train"], arrays["y_train"]

    def dataset(batch: int) -> tf.data.Dataset:
        return pipeline.make_dataset(x, y, batch_size=batch, training=True, seed=0,
                                 cache=False).repeat()

    model = models.compile_model(models.build_model(seed=0), keras.optimizers.Adam(1e-3))

    def timed_fit(ds: tf.data.Dataset, steps: int, callbacks: list) -> tuple[float, dict]:
        """Seconds of one fit's steps, with the CPU clock's window over the same interval."""
        clock = CpuClock(sample_every_s=0.5).start()
        seconds, teardown = fit_steps_and_teardown(model, ds, steps, callbacks, clock)
        return seconds, {**clock.window.to_dict(), "teardown_s": round(teardown, 3)}

    def say(line: str) -> None:
        print(line, flush=True)

    def rounds_of(run_round):  # noqa: ANN001, ANN202 - a local helper
        return collect_rounds(run_round, args.repeats, max_extra=args.max_extra_rounds,
                              printer=say)

    def done(got, **fields: object) -> None:  # noqa: ANN001
        emit(**fields, variants=got.samples, cpu=got.cpu, rounds=got.info(), round_log=got.log,
             intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
             inter_op=tf.config.threading.get_inter_op_parallelism_threads())

    if args.command == "callback":
        ds = dataset(args.batch)

        def meter() -> list:
            return [Throughput(args.batch, warmup_epochs=0, verbose=False)]

        fit_steps_and_teardown(model, ds, 5, [])  # trace both paths before measuring
        fit_steps_and_teardown(model, ds, 5, meter())
        def callback_round(i: int) -> dict:
            # A B in even rounds, B A in odd ones: a fit that runs second (warmer caches, or a drift) favours
            # neither side over the rounds.
            order = ("without", "with") if i % 2 == 0 else ("with", "without")
            return {name: timed_fit(ds, args.steps, meter() if name == "with" else []) for name in order}

        got = rounds_of(callback_round)
        # The same question asked without the fit's own noise: what a training step's callback hooks cost with
        # and without Throughput, Keras's CallbackList driven directly with the logs fit passes (tensors).
        hooks = {name: [] for name in ("hooks_without", "hooks_with")}
        for i in range(len(next(iter(got.samples.values())))):
            order = ("hooks_without", "hooks_with") if i % 2 == 0 else ("hooks_with", "hooks_without")
            for name in order:
                hooks[name].append(hook_seconds_per_step(model, meter() if name == "hooks_with" else []))
        done(got, section="4", unit="s", batch=args.batch, steps=args.steps, hooks=hooks)
    elif args.command == "pipeline":
        ds = dataset(args.batch)
        fit_steps_and_teardown(model, ds, 5, [])
        pipeline_steps = args.steps * 25

        def pipeline_round(i: int) -> dict:
            iterator = iter(ds)
            next(iterator)  # start the pipeline's threads outside the timed part
            start = time.perf_counter()
            for _ in range(pipeline_steps):
                next(iterator)
            rate = pipeline_steps * args.batch / (time.perf_counter() - start)
            seconds, window = timed_fit(ds, args.steps, [])
            # the pipeline alone is not judged (it need not fill the cores); the model is
            return {"pipeline": (rate, None), "model": (args.steps * args.batch / seconds, window)}

        done(rounds_of(pipeline_round), section="5", unit="img/s", batch=args.batch,
             steps=args.steps, pipeline_steps=pipeline_steps)
    else:
        sets = {b: dataset(b) for b in args.batch_sizes}
        for ds in sets.values():
            fit_steps_and_teardown(model, ds, 3, [])  # trace every batch shape
        def batches_round(i: int) -> dict:
            out = {}
            for b, ds in sets.items():
                steps = max(1, args.images // b)
                seconds, window = timed_fit(ds, steps, [])
                out[str(b)] = (steps * b / seconds, window)
            return out

        done(rounds_of(batches_round), section="6", unit="img/s", images=args.images)
    return 0


if __name__ == "__main__":
    sys.exit(main())
