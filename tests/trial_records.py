"""Trial records for the tests of notebook 04's modules: a real :class:`~course_lib.lessons.trials.Trial` in which
a test sets only the fields it is about."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from course_lib.lessons.trials import Trial

TEMPLATE = Trial(seed=0, epochs=2, updates=24, val_curve=((12, 0.5), (24, 0.5)), val_accuracy=0.5,
                 loss_curve=(1.0, 1.0), epoch_s=(1.0, 1.0), test_accuracy=0.5, test_loss=0.5, lr=0.01, train_s=2.0)


def trial(**fields: Any) -> Trial:
    """:data:`TEMPLATE` with ``fields`` replaced (sequences become tuples, as :func:`train_trial` gives them)."""
    return replace(TEMPLATE, **{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
