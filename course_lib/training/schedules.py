"""Learning-rate schedules the training scripts use beyond Horovod's own callbacks.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["linear_warmup", "warmup_multiplier"]


def warmup_multiplier(growth: float, warmup_epochs: int,
                      steps_per_epoch: int) -> Callable[[float], float]:
    """Learning-rate multiplier of a linear warm-up from ``lr / growth`` to ``lr``.

    Horovod's ``LearningRateWarmupCallback`` starts at ``lr / hvd.size()``: one worker's rate only when
    the rate was scaled linearly by the workers. Give this to ``LearningRateScheduleCallback`` when the
    rate grew by another factor: ``size × k`` with accumulation, ``√size`` for Adam (notebook 03), so the
    ramp starts at one worker's rate.

    Args:
        growth: Factor by which the rate was scaled (workers × backward passes; √workers), >= 1.
        warmup_epochs: Epochs of the ramp, >= 1.
        steps_per_epoch: Training steps per epoch, >= 1.

    Returns:
        ``multiplier(epoch)`` = ``(e (growth - 1) / warmup_epochs + 1) / growth`` with
        ``e = epoch + 1 / steps_per_epoch`` (Horovod's formula; 1 at the last step of the ramp).

    Raises:
        ValueError: A parameter below 1.
    """
    for name, value in (("growth", growth), ("warmup_epochs", warmup_epochs),
                        ("steps_per_epoch", steps_per_epoch)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")

    def multiplier(epoch: float) -> float:
        e = epoch + 1.0 / steps_per_epoch
        return (e * (growth - 1) / warmup_epochs + 1.0) / growth

    return multiplier


def linear_warmup(peak_lr: float, warmup_updates: int, growth: float) -> "Any":
    """A Keras schedule: linear ramp from ``peak_lr / growth`` to ``peak_lr``, counted in UPDATES.

    It reads ``optimizer.iterations``, which counts optimizer updates with real batches and with
    :mod:`course_lib.training.accumulation` (not with Horovod's own accumulation), so the ramp
    has the same length in updates whatever the batch is made of.

    Args:
        peak_lr: Learning rate reached at update ``warmup_updates`` and kept afterwards.
        warmup_updates: Length of the ramp in updates, >= 1.
        growth: Start at ``peak_lr / growth`` (the small-batch rate when the rate was scaled by the
            batch growth), >= 1.

    Returns:
        A ``keras.optimizers.schedules.LearningRateSchedule``.

    Raises:
        ValueError: A non-positive rate, or ``warmup_updates`` / ``growth`` below 1.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow
    import tensorflow as tf

    if peak_lr <= 0 or warmup_updates < 1 or growth < 1:
        raise ValueError(f"need peak_lr > 0, warmup_updates >= 1, growth >= 1; got {peak_lr}, "
                         f"{warmup_updates}, {growth}")

    class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step: Any) -> Any:
            done = tf.minimum(tf.cast(step, tf.float32) + 1.0, float(warmup_updates))
            start = peak_lr / growth
            return start + (peak_lr - start) * done / float(warmup_updates)

        def get_config(self) -> dict:
            return {"peak_lr": peak_lr, "warmup_updates": warmup_updates, "growth": growth}

    return LinearWarmup()
