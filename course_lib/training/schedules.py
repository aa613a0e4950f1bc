"""Learning-rate schedules the training scripts use beyond Horovod's own callbacks, and the course's rule
for scaling the rate with the global batch (``--scale-lr`` in every script calls :func:`scaled_lr`).

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
from typing import Any, Callable

__all__ = ["LR_SCALING", "linear_warmup", "lr_scaling_rule", "scaled_lr", "warmup_multiplier"]

#: The course's rule per optimizer (notebooks 03 and 04): ``"linear"`` multiplies the rate by the growth of the
#: global batch, ``"sqrt"`` by its square root. SGD-family optimizers (momentum SGD, and LARS, which is momentum
#: SGD with a per-layer trust ratio: Goyal et al. 2017, arXiv:1706.02677; arXiv:1708.03888) scale linearly; Adam and
#: LAMB, which divide each step by the gradient's running size, scale by the square root (Malladi et al. 2022,
#: arXiv:2205.10287; the LAMB paper, arXiv:1904.00962, scales its rate by the square root too).
LR_SCALING: dict[str, str] = {"sgd": "linear", "lars": "linear", "adam": "sqrt", "lamb": "sqrt"}


def lr_scaling_rule(optimizer: str) -> str:
    """The course's learning-rate scaling rule for an optimizer: ``"linear"`` or ``"sqrt"``.

    Args:
        optimizer: A course optimizer name (``course_lib.training.flags.OPTIMIZERS``), any case.

    Returns:
        ``"linear"`` (sgd, lars) or ``"sqrt"`` (adam, lamb).

    Raises:
        ValueError: An optimizer the course has no rule for; the message lists those it has.

    Introduced in notebooks/03_horovod.ipynb (the rule; notebook 04 measures it).
    """
    try:
        return LR_SCALING[optimizer.lower()]
    except KeyError:
        raise ValueError(f"no learning-rate scaling rule for optimizer {optimizer!r}; the course has one for "
                         f"{', '.join(sorted(LR_SCALING))} (course_lib.training.schedules.LR_SCALING)") from None


def scaled_lr(optimizer: str, base_lr: float, growth: float) -> float:
    """The learning rate for a global batch ``growth`` times one worker's, by the course's rule per optimizer.

    SGD (momentum SGD) and LARS: ``base_lr × growth`` (linear); Adam and LAMB: ``base_lr × √growth``. ``growth``
    is the number of workers or replicas N (times the backward passes per update with gradient accumulation).
    Every course script's ``--scale-lr`` calls this one function, so all of them apply the same rule.

    Args:
        optimizer: A course optimizer name: ``"sgd"``, ``"lars"``, ``"adam"`` or ``"lamb"`` (any case).
        base_lr: One worker's learning rate (the script's ``--lr``), > 0.
        growth: Growth of the global batch over one worker's batch, >= 1.

    Returns:
        The scaled learning rate (``base_lr`` itself when ``growth`` is 1).

    Raises:
        ValueError: An unknown optimizer, ``base_lr`` <= 0 or ``growth`` < 1.

    Introduced in notebooks/03_horovod.ipynb (the rule; notebook 04 measures it).
    """
    rule = lr_scaling_rule(optimizer)
    if not base_lr > 0 or not growth >= 1:
        raise ValueError(f"need base_lr > 0 and growth >= 1, got base_lr={base_lr!r}, growth={growth!r}")
    return float(base_lr) * (growth if rule == "linear" else math.sqrt(growth))


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
