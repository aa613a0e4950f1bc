"""Trial records for the tests of notebook 04's modules: a real
:class:`~course_lib.lessons.large_batch.trials.Trial` in which a test sets only the fields it is about."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from course_lib.lessons.large_batch.ladder import Config
from course_lib.lessons.large_batch.trials import Trial

TEMPLATE = Trial(seed=0, epochs=2, updates=24, val_curve=((12, 0.5), (24, 0.5)), val_accuracy=0.5,
                 loss_curve=(1.0, 1.0), epoch_s=(1.0, 1.0), test_accuracy=0.5, test_loss=0.5, lr=0.01, train_s=2.0)


def trial(**fields: Any) -> Trial:
    """:data:`TEMPLATE` with ``fields`` replaced (sequences become tuples, as :func:`train_trial` gives them)."""
    return replace(TEMPLATE, **{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


def trials(accuracies: list[float], *, val: list[list[float]] | None = None, updates: int = 24) -> list[Trial]:
    """One trial per seed with these test accuracies; each validation curve ends at its accuracy (or ``val``)."""
    val = val or [[0.5, a] for a in accuracies]
    return [trial(seed=seed, test_accuracy=acc, val_accuracy=curve[-1], updates=updates, lr=0.01,
                  val_curve=[(updates // len(curve) * (i + 1), v) for i, v in enumerate(curve)])
            for seed, (acc, curve) in enumerate(zip(accuracies, val))]


SETTINGS = {"optimizer": "sgd", "base_lr": 0.01, "base_batch": 32, "batch": 32}
#: A three-rung ladder: the baseline, the naive large batch, and linear scaling on top of it.
TRIAL_LADDER = [
    Config("baseline", SETTINGS),
    Config("naive", {**SETTINGS, "batch": 256}, parent="baseline"),
    Config("+ linear", {**SETTINGS, "batch": 256, "lr_scaling": "linear"}, parent="naive"),
]
