"""Exact gradient accumulation: k micro-batches of size b make ONE update of a k·b batch.

Horovod 0.28.1's ``DistributedOptimizer(backward_passes_per_step=k)`` also sums k gradients, but
it advances ``optimizer.iterations`` at every micro-step. Adam and LAMB read that counter for their
bias correction (and Keras schedules read it for the learning rate), so Horovod's emulated step
is not the step of a k× batch (tests/test_private_apis.py pins that behaviour). Here the course
accumulates in its own ``train_step``:

* every micro-step adds the micro-batch's mean gradient to an accumulator (variables that are not
  part of the model, so digests, checkpoints and broadcasts do not change);
* every k-th micro-step averages the accumulator (optionally across workers, once), hands it to
  the optimizer (``iterations`` += 1, exactly as one step of the large batch) and clears it.

With equal micro-batches the mean of k micro-batch mean gradients *is* the mean gradient of their
union, so the weights equal those of one k·b step (tests/test_accumulation.py: SGD with momentum,
Adam, LARS and LAMB after 1, 2 and 10 updates). Two limits, stated honestly: a smaller last
batch of an epoch gets the same weight as a full one (choose N divisible by b), and dropout draws
its masks per micro-batch (a real k·b batch draws them all at once: same distribution, other
numbers). A partial accumulation carries into the next epoch; choose steps per epoch divisible
by k so that updates per epoch = steps / k exactly.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from course_lib.training.keras2 import keras
import tensorflow as tf

__all__ = ["GradientAccumulator", "accumulate_gradients"]

AllReduce = Callable[[Sequence[tf.Tensor]], Sequence[tf.Tensor]]


class GradientAccumulator:
    """The accumulator variables and the train step that uses them (see the module docstring).

    Args:
        model: A compiled Keras model whose optimizer is already built.
        k: Micro-batches per update, >= 1.
        all_reduce: Averages a list of gradients across workers (e.g. Horovod's grouped
            all-reduce); called once per update, on the averaged accumulator. ``None``: one process.

    Raises:
        ValueError: ``k < 1`` or the model is not compiled.

    Introduced in notebooks/04_large_batch.ipynb.
    """

    def __init__(self, model: keras.Model, k: int, all_reduce: AllReduce | None = None) -> None:
        if int(k) < 1:
            raise ValueError(f"k (backward passes per step) must be >= 1, got {k}")
        if getattr(model, "optimizer", None) is None:
            raise ValueError("compile the model before accumulate_gradients(model, k)")
        self.model, self.k, self.all_reduce = model, int(k), all_reduce
        self.optimizer = model.optimizer
        variables = model.trainable_variables
        self.optimizer.build(variables)  # slots must exist before the first tf.cond branch
        self.sums = [tf.Variable(tf.zeros_like(v), trainable=False, name="accumulated_gradient")
                     for v in variables]
        self.micro_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="micro_steps")

    def _gradients(self, loss: tf.Tensor, tape: tf.GradientTape) -> list[tf.Tensor]:
        """Gradients of ``loss``, unscaled when the optimizer is a LossScaleOptimizer."""
        variables = self.model.trainable_variables
        if isinstance(self.optimizer, keras.mixed_precision.LossScaleOptimizer):
            grads = tape.gradient(loss, variables)
            return self.optimizer.get_unscaled_gradients(grads)
        return tape.gradient(loss, variables)

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        """One micro-step: forward, backward, accumulate; every k-th also updates the weights."""
        model = self.model
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x, y, y_pred, sample_weight)
            scaled = (self.optimizer.get_scaled_loss(loss) if isinstance(
                self.optimizer, keras.mixed_precision.LossScaleOptimizer) else loss)
        for total, grad in zip(self.sums, self._gradients(scaled, tape)):
            total.assign_add(tf.convert_to_tensor(grad))
        self.micro_steps.assign_add(1)
        tf.cond(self.micro_steps % self.k == 0, self._apply, lambda: tf.constant(False))
        return model.compute_metrics(x, y, y_pred, sample_weight)

    def _apply(self) -> tf.Tensor:
        """Average the k gradients (and the workers), update once, clear the accumulator."""
        means = [total / tf.cast(self.k, total.dtype) for total in self.sums]
        if self.all_reduce is not None:
            means = list(self.all_reduce(means))
        self.optimizer.apply_gradients(zip(means, self.model.trainable_variables))
        for total in self.sums:
            total.assign(tf.zeros_like(total))
        return tf.constant(True)


def accumulate_gradients(model: keras.Model, k: int,
                         all_reduce: AllReduce | None = None) -> GradientAccumulator:
    """Make ``model.fit`` update once per ``k`` batches, exactly like one step of a k× batch.

    Call it after ``model.compile`` (and before ``fit``); it replaces the model's ``train_step``.
    ``optimizer.iterations`` then counts updates, not micro-batches, so Adam/LAMB bias correction
    and learning-rate schedules see the large-batch step number.

    Args:
        model: A compiled Keras model (its optimizer: any Keras 2 (tf_keras) optimizer, NOT
            ``hvd.DistributedOptimizer``: pass ``all_reduce`` instead).
        k: Micro-batches per update.
        all_reduce: Averages a list of gradients across workers, once per update.

    Returns:
        The :class:`GradientAccumulator` (``micro_steps`` counts micro-batches).

    Raises:
        ValueError: ``k < 1``, an uncompiled model, or a Horovod-wrapped optimizer.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    inner = getattr(model.optimizer, "inner_optimizer", model.optimizer)
    if hasattr(inner, "_agg_helper") or hasattr(inner, "_allreduce_grads"):
        raise ValueError("the optimizer is wrapped by hvd.DistributedOptimizer; pass the plain "
                         "optimizer and all_reduce=<Horovod grouped all-reduce> instead, so that "
                         "gradients are averaged once per update")
    accumulator = GradientAccumulator(model, k, all_reduce)
    model.train_step = accumulator.train_step  # Keras builds its train function from this
    model.make_train_function(force=True)
    return accumulator
