"""One model, traced once, reset for every run of notebook 04's ladders.

Building, compiling and tracing a Keras model for every run cost notebook 04 more than the runs'
few hundred updates. A :class:`TrialRunner` builds the course CNN once, traces one training step
per optimizer and one prediction function, and starts every run from a clean state instead: the
weights are assigned from the seed's initial weights (those of ``build_model(seed=seed, width=...)``), the
optimizer's slots and update counter are zeroed, the learning-rate schedule reads its peak, start
and warm-up length from variables (a new configuration retraces nothing) and the dropout generators
are reseeded from ``(seed, epoch)`` at every epoch start, like ``ReseedDropout`` in the scripts.
With op determinism and fixed thread pools the same seed gives bit-identical accuracies, whatever
ran before it.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

__all__ = ["TrialRunner"]


class TrialRunner:
    """Trains the course CNN from a seed's initial weights, one run after the other.

    Args:
        seed: Seed of op-level randomness set up once (the runs' own randomness comes from theirs).
        width: Divisor of the CNN's convolution filters (``models.build_model(width=...)``); 1 is the
            course CNN, notebook 04 trains a narrower one (its runs are compute-bound).

    Introduced in notebooks/04_large_batch.ipynb.
    """

    def __init__(self, seed: int = 0, *, width: int = 1) -> None:
        import tensorflow as tf

        # late: these modules import TensorFlow, which importing course_lib.lessons must not
        from course_lib.training import models, seeding
        from course_lib.training.keras2 import keras  # late: imports TensorFlow

        seeding.configure(seed, deterministic=True)
        self._tf = tf
        self.width = width
        self.model = models.build_model(seed=seed, width=width)
        self.model(np.zeros((1, *models.INPUT_SHAPE), np.float32), training=True)  # dropout generators
        self._initial: dict[int, list[np.ndarray]] = {}
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self._peak, self._start, self._warmup = (tf.Variable(0.0, trainable=False) for _ in range(3))
        self._steps: dict[str, tuple[Any, Callable[..., Any]]] = {}
        images = tf.TensorSpec([None, *models.INPUT_SHAPE], tf.float32)
        self._predict = tf.function(lambda x: self.model(x, training=False), input_signature=[images])
        self._spec = [images, tf.TensorSpec([None], tf.int32)]

    def rate(self, step: Any) -> Any:
        """The learning rate of update ``step`` (0-based): a linear ramp over ``warmup`` updates
        from ``start`` to ``peak`` (the formula of ``schedules.linear_warmup``), ``peak`` without one."""
        tf = self._tf
        length = tf.maximum(self._warmup, 1.0)
        done = tf.minimum(tf.cast(step, tf.float32) + 1.0, length)
        ramp = self._start + (self._peak - self._start) * done / length
        return tf.where(self._warmup > 0, ramp, self._peak)

    def set_rate(self, peak: float, start: float, warmup_updates: int) -> None:
        """Set the schedule of the next run (no retracing: the step reads these variables)."""
        self._peak.assign(peak)
        self._start.assign(start)
        self._warmup.assign(float(warmup_updates))

    def reset(self, optimizer: str, seed: int) -> Callable[..., Any]:
        """Start a run: the seed's initial weights, a zeroed optimizer; returns its traced step."""
        from course_lib.training import models  # late: imports TensorFlow

        if seed not in self._initial:
            self._initial[seed] = models.build_model(seed=seed, width=self.width).get_weights()
        opt, step = self._step(optimizer)
        self.model.set_weights(self._initial[seed])
        for variable in opt.variables:
            variable.assign(self._tf.zeros_like(variable))
        return step

    def _step(self, name: str) -> tuple[Any, Callable[..., Any]]:
        if name not in self._steps:
            from course_lib.training import models, optimizers  # late: import TensorFlow
            from course_lib.training.keras2 import keras  # late: imports TensorFlow

            tf, model, runner = self._tf, self.model, self

            class Schedule(keras.optimizers.schedules.LearningRateSchedule):
                def __call__(self, step: Any) -> Any:
                    return runner.rate(step)

                def get_config(self) -> dict:
                    return {}

            opt = optimizers.get_optimizer(name, Schedule())
            opt.build(model.trainable_variables)

            def train_step(x: Any, y: Any) -> Any:
                with tf.GradientTape() as tape:
                    loss = self._loss(y, model(x, training=True))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            traced = tf.function(train_step, input_signature=self._spec)
            traced(np.zeros((1, *models.INPUT_SHAPE), np.float32), np.zeros(1, np.int32))  # trace now,
            self._steps[name] = (opt, traced)   # so that no timed epoch includes it (reset undoes it)
        return self._steps[name]

    def updates(self, optimizer: str) -> int:
        """Updates the optimizer made since its last reset."""
        return int(self._step(optimizer)[0].iterations.numpy())

    def logits(self, images: np.ndarray, batch: int) -> np.ndarray:
        """Logits of float32 ``images`` (N, 28, 28, 1), ``batch`` at a time, by one traced function."""
        return np.concatenate([self._predict(images[i:i + batch]).numpy()
                               for i in range(0, len(images), batch)])

    def timed_epoch(self, step: Callable[..., Any], x: np.ndarray, y: np.ndarray, order: np.ndarray,
                    batch: int, check: Callable[[], None], every: int) -> tuple[float, float]:
        """One epoch of full batches in ``order``, ``check()`` after every ``every`` updates.

        Returns:
            ``(mean training loss, training seconds without the checks)``.
        """
        losses, paused, started = [], 0.0, time.perf_counter()
        for k in range(len(order) // batch):
            rows = order[k * batch:(k + 1) * batch]
            losses.append(step(x[rows], y[rows]))
            if (k + 1) % every == 0:
                mark = time.perf_counter()
                check()
                paused += time.perf_counter() - mark
        mean = float(np.mean([float(v) for v in losses]))
        return mean, time.perf_counter() - started - paused
