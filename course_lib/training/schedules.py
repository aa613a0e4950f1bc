"""Learning-rate schedules the training scripts use beyond Horovod's own callbacks.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["warmup_multiplier"]


def warmup_multiplier(growth: int, warmup_epochs: int,
                      steps_per_epoch: int) -> Callable[[float], float]:
    """Learning-rate multiplier of a linear warm-up from ``lr / growth`` to ``lr``.

    Horovod's ``LearningRateWarmupCallback`` starts at ``lr / hvd.size()``; with accumulation the
    batch grows by ``size × k``, so the script gives this to ``LearningRateScheduleCallback``.

    Args:
        growth: Factor by which the global batch grew (workers × backward passes), >= 1.
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
