"""Self-check of the coding exercise of notebooks/04_large_batch.ipynb: linear scaling + warm-up.

The learner writes ``my_learning_rate(update, *, base_lr, base_batch, batch, warmup_updates)``: the
learning rate of optimizer update ``update`` (0 = the first) when the batch grew from ``base_batch``
to ``batch``. The rate is scaled linearly (``base_lr × batch / base_batch``, Goyal et al. 2017) and
reached by a linear ramp over ``warmup_updates`` updates that starts from the small-batch rate
``base_lr``: at update ``u`` the ramp has done ``min(u + 1, warmup_updates) / warmup_updates`` of its
way (``warmup_updates == 0``: no ramp). :func:`check_lr_schedule` compares the learner's rates with
the schedule the notebook's runs use (:func:`course_lib.lessons.trials.peak_lr` and
:func:`course_lib.training.schedules.linear_warmup`), computed here, not stored.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
from typing import Any, Callable

__all__ = ["CASES", "reference_rate", "check_lr_schedule"]

KEY = "04.lr_schedule"

#: (base_lr, base_batch, batch, warmup_updates, updates checked)
CASES: list[tuple[float, int, int, int, list[int]]] = [
    (0.01, 32, 256, 4, [0, 1, 2, 3, 4, 11]),
    (0.001, 32, 128, 8, [0, 3, 7, 8, 50]),
    (0.05, 64, 512, 0, [0, 9]),
]


def reference_rate(update: int, *, base_lr: float, base_batch: int, batch: int,
                   warmup_updates: int) -> float:
    """The rate of update ``update`` under the course's own schedule (TensorFlow's, evaluated).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    from course_lib.lessons.trials import peak_lr
    from course_lib.training import schedules

    peak = peak_lr({"base_lr": base_lr, "base_batch": base_batch, "batch": batch,
                    "lr_scaling": "linear"})
    if warmup_updates == 0:
        return peak
    schedule = schedules.linear_warmup(peak, warmup_updates, peak / base_lr)
    return float(schedule(update))


def _diagnose(case: tuple[float, int, int, int], updates: list[int], got: list[float]) -> str:
    """A hint: which typical mistake reproduces ALL the learner's rates of this case."""
    base_lr, base_batch, batch, warmup = case
    peak, root = base_lr * batch / base_batch, base_lr * math.sqrt(batch / base_batch)

    def ramp(u: int, shift: int = 1) -> float:
        return min(u + shift, warmup) / warmup if warmup else 1.0

    mistakes: list[tuple[Callable[[int], float], str]] = [
        (lambda u: base_lr, "the rate never grows: scale base_lr by batch / base_batch (linear scaling rule)"),
        (lambda u: peak, "the rate must not jump to the scaled value at once: ramp up to it over warmup_updates "
                         "updates, starting from base_lr"),
        (lambda u: base_lr + (root - base_lr) * ramp(u),
         "this notebook's SGD recipe scales linearly (× batch / base_batch), not by the square root"),
        (lambda u: peak * ramp(u), "the ramp starts from the small-batch rate base_lr, not from 0: the small "
                                   "batch was already stable at that rate"),
        (lambda u: base_lr + (peak - base_lr) * ramp(u, shift=0),
         "update 0 is the first update and already takes one step of the ramp: at update u the ramp has done "
         "min(u + 1, warmup_updates) / warmup_updates of its way"),
    ]
    for wrong, hint in mistakes:
        if all(math.isclose(g, wrong(u), rel_tol=1e-4) for u, g in zip(updates, got)):
            return hint
    return ("the rate is base_lr + (base_lr × batch / base_batch − base_lr) × min(u + 1, warmup_updates) / "
            "warmup_updates, and base_lr × batch / base_batch without warm-up")


def check_lr_schedule(learning_rate: Callable[..., Any]) -> bool:
    """Print and return whether the learner's ``learning_rate`` matches the course's schedule.

    Args:
        learning_rate: ``learning_rate(update, *, base_lr, base_batch, batch, warmup_updates)``.

    Returns:
        True when every checked update agrees (relative 1e-5); a function that raises
        ``NotImplementedError`` (the placeholder) is "not attempted yet" and returns False.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    for base_lr, base_batch, batch, warmup, updates in CASES:
        settings: dict[str, Any] = {"base_lr": base_lr, "base_batch": base_batch, "batch": batch,
                                    "warmup_updates": warmup}
        got: list[float] = []
        for update in updates:
            try:
                value = learning_rate(update, **settings)
            except NotImplementedError:
                print(f"[{KEY}] not attempted yet — write my_learning_rate in the cell above and run both cells.")
                return False
            except Exception as exc:  # the learner's code failed: say how, do not crash the notebook
                print(f"[{KEY}] not yet: your function raised {type(exc).__name__}: {str(exc)[:200]}")
                return False
            try:
                got.append(float(value))
            except (TypeError, ValueError):
                print(f"[{KEY}] not yet: return a number (the learning rate), got {value!r}.")
                return False
        expected = [reference_rate(update, **settings) for update in updates]
        wrong = [(u, g) for u, g, e in zip(updates, got, expected) if not math.isclose(g, e, rel_tol=1e-5)]
        if wrong:
            update, value = wrong[0]
            print(f"[{KEY}] not yet: base_lr {base_lr}, batch {base_batch} -> {batch}, warmup_updates {warmup}: "
                  f"at update {update} your rate is {value:.6g}. "
                  f"Hint: {_diagnose((base_lr, base_batch, batch, warmup), updates, got)}.")
            return False
    checked = sum(len(case[-1]) for case in CASES)
    print(f"[{KEY}] correct: your schedule gives the course's rate at all {checked} updates checked.")
    return True
