"""Self-checks of notebook 04: the coding exercise (``04.lr_schedule``) and the seeds experiment (``04.few_seeds``).

:func:`check_lr_schedule` runs the learner's ``my_learning_rate`` on the cases of :data:`LR_CASES` and compares
it with the rate the notebook's own runs use (:func:`reference_rate`: TensorFlow's schedule of
``course_lib.training.schedules``, evaluated), not with a stored table; a wrong schedule is matched against the
typical mistakes to name the one made, in a hint that names the mistake, not the formula. It prints and returns
its verdict the one way :mod:`course_lib.lessons.common.checks` defines.

:func:`check_few_seeds` is the prediction exercise: the learner recomputes the recovered fraction's interval on
fewer seeds and predicts how it moves; the expected word comes from the learner's own numbers.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from course_lib.lessons.common.checks import learner_call, right, waiting, word_answer, wrong
from course_lib.lessons.large_batch.recovery import Recovery
from course_lib.lessons.large_batch.trials import peak_lr
from course_lib.training import schedules
from course_lib.training.stats import t_critical_95

__all__ = ["LR_KEY", "LR_CASES", "reference_rate", "check_lr_schedule", "SEEDS_KEY", "SEED_WORDS",
           "check_few_seeds"]

LR_KEY = "04.lr_schedule"
SEEDS_KEY = "04.few_seeds"
SEED_WORDS = ("wider", "narrower", "same")

#: Notebook 04: (base_lr, base_batch, batch, warmup_updates, updates checked)
LR_CASES: list[tuple[float, int, int, int, list[int]]] = [
    (0.01, 32, 256, 4, [0, 1, 2, 3, 4, 11]),
    (0.001, 32, 128, 8, [0, 3, 7, 8, 50]),
    (0.05, 64, 512, 0, [0, 9]),
]


def reference_rate(update: int, *, base_lr: float, base_batch: int, batch: int,
                   warmup_updates: int) -> float:
    """The rate of update ``update`` under the course's own schedule (TensorFlow's, evaluated).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    peak = peak_lr({"base_lr": base_lr, "base_batch": base_batch, "batch": batch,
                    "lr_scaling": "linear"})
    if warmup_updates == 0:
        return peak
    schedule = schedules.linear_warmup(peak, warmup_updates, peak / base_lr)
    return float(schedule(update))


def _diagnose_lr(case: tuple[float, int, int, int], updates: list[int], got: list[float]) -> str:
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
         "update 0 is the first update: how far along the ramp is the rate after it?"),
    ]
    for mistake, hint in mistakes:
        if all(math.isclose(g, mistake(u), rel_tol=1e-4) for u, g in zip(updates, got)):
            return hint
    return ("work out by hand the rate at update 0, at the last update of the warm-up and after it: where does "
            "the ramp start, where does it end, and how far along is it at update u")


def check_lr_schedule(learning_rate: Callable[..., Any]) -> bool:
    """Print and return whether the learner's ``learning_rate`` matches the course's schedule.

    Args:
        learning_rate: ``learning_rate(update, *, base_lr, base_batch, batch, warmup_updates)``.

    Returns:
        True when every checked update agrees (relative 1e-5); a function that raises
        ``NotImplementedError`` (the placeholder) is "not attempted yet" and returns False.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    for base_lr, base_batch, batch, warmup, updates in LR_CASES:
        settings: dict[str, Any] = {"base_lr": base_lr, "base_batch": base_batch, "batch": batch,
                                    "warmup_updates": warmup}
        got: list[float] = []
        for update in updates:
            ran, value = learner_call(LR_KEY, learning_rate, update, **settings, what="function",
                                       placeholder="not attempted yet — write my_learning_rate in the cell above "
                                       "and run both cells.")
            if not ran:
                return False
            try:
                got.append(float(value))
            except (TypeError, ValueError):
                return wrong(LR_KEY, f"your function returned {value!r}.", "return a number, the learning rate")
        expected = [reference_rate(update, **settings) for update in updates]
        off = [(u, g) for u, g, e in zip(updates, got, expected) if not math.isclose(g, e, rel_tol=1e-5)]
        if off:
            update, value = off[0]
            return wrong(LR_KEY, f"base_lr {base_lr}, batch {base_batch} -> {batch}, warmup_updates {warmup}: "
                         f"at update {update} your rate is {value:.6g}.",
                         _diagnose_lr((base_lr, base_batch, batch, warmup), updates, got))
    checked = sum(len(case[-1]) for case in LR_CASES)
    return right(LR_KEY, f"your schedule gives the course's rate at all {checked} updates checked")


def check_few_seeds(answer: Any, *, kept: int | None, few: Recovery | None, full: Recovery, seeds: int) -> bool:
    """Self-check ``04.few_seeds``: the recovered fraction recomputed on the first ``kept`` seeds; which way did its
    95 % interval move?

    The expected word comes from the learner's own numbers: ``"wider"`` (or ``"narrower"``) when the interval on
    ``kept`` seeds is more than a tenth wider (narrower) than the one on all ``seeds``, else ``"same"``; an
    unbounded interval (the naive loss not resolved from 0) is wider. The verdict splits the factor: the part
    that ``t`` and ``sqrt(n)`` alone give at equal spread, and the rest, which is how much the kept seeds spread.

    Args:
        answer: ``"wider"``, ``"narrower"`` or ``"same"``; ``None``: not answered yet.
        kept: Seeds the learner kept (2 or more, fewer than ``seeds``); ``None``: not run yet.
        few: The recovered fraction on the kept seeds (:func:`course_lib.lessons.large_batch.recovery.recovered_fraction`;
            infinite ends: unbounded).
        full: The recovered fraction on all the seeds.
        seeds: Seeds of the full comparison.

    Returns:
        True when the word matches what the learner's numbers show.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if kept is None or few is None:
        return waiting(SEEDS_KEY, "not run yet", "set FEW_SEEDS in the exercise's first cell and run the next cell.")
    if not 2 <= kept < seeds:
        return wrong(SEEDS_KEY, f"you kept {kept} seeds of {seeds}.",
                     "a confidence interval needs at least 2 seeds, and fewer than all of them changes something")
    word = word_answer(SEEDS_KEY, answer, SEED_WORDS)
    if word is None:
        return False
    unbounded = math.isinf(few.high - few.low)
    ratio = math.inf if unbounded else (few.high - few.low) / (full.high - full.low)
    expected = "wider" if ratio > 1.1 else "narrower" if ratio < 1 / 1.1 else "same"
    if word != expected:
        return wrong(SEEDS_KEY, f"the interval of your recomputation is not {word}.",
                     "compare the two intervals printed above; which two factors of a 95 % interval depend on "
                     "the number of seeds")
    if unbounded:
        return right(SEEDS_KEY, f"on {kept} seeds the interval is unbounded: the naive loss itself is not resolved "
                     "from 0, so no fraction of it can be told")
    alone = t_critical_95(kept - 1) / t_critical_95(seeds - 1) * math.sqrt(seeds / kept)
    return right(SEEDS_KEY, f"on {kept} seeds the interval is ≈{ratio:.1f}x as wide as on {seeds}. A larger t and a "
                 f"smaller sqrt(n) alone make it {alone:.1f}x at equal spread; the rest is how much these {kept} "
                 "seeds happen to spread")
