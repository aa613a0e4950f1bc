"""Notebook 04's question: how much of the naive large batch's accuracy loss does the recipe win back?

Per ladder, three rows run the same seeds: the small-batch ``baseline``, the ``naive`` large batch (same
learning rate) and the large-batch ``recipe`` (scaled learning rate and warm-up). The answer is the
**recovered fraction** ``(recipe - naive) / (baseline - naive)`` of the mean test accuracies: 0 when the
recipe wins back nothing, 1 when it brings the large batch back to the small one. Its 95 % interval is
Fieller's for a ratio of paired means (:func:`course_lib.training.stats.paired_ratio_ci95`); it is unbounded,
and the verdict "cannot tell", when the naive loss itself is not resolved from 0.

The seeds come from a pilot (:data:`PILOT`, seeds the ladders do not use) by :func:`plan_seeds`; the
pilot's provenance and how to run it again are in ``instructor/notes/04_large_batch.md``. Nothing here
imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
import statistics
from typing import Mapping, NamedTuple, Sequence

from course_lib.lessons.large_batch.trials import AccuracyKey, Trial
from course_lib.training.stats import (CANNOT_TELL, interval_verdict, mean_ci95, paired_ratio_ci95,
                                       spread_upper_bound, t_critical_95)

__all__ = ["PILOT", "PILOT_SEEDS", "Recovery", "Plan", "recovered_fraction", "recovery_word", "fraction_text",
           "recovery_line", "recovery_sentence", "seeds_needed", "plan_seeds"]

#: The pilot's seeds (the ladders use 0, 1, 2, ...).
PILOT_SEEDS = list(range(200, 224))

#: Test accuracy per pilot seed (:data:`PILOT_SEEDS`, in order), of each ladder's three rows on notebook 04's
#: budget (1 536 training images, 2 epochs, batch 16 vs 128, the narrow CNN, the first 2 000 test images).
PILOT: dict[str, dict[str, list[float]]] = {
    "SGD": {
        "baseline": [0.6655, 0.6775, 0.69, 0.6965, 0.6995, 0.757, 0.6845, 0.701, 0.6845, 0.715, 0.7215, 0.721,
                     0.726, 0.671, 0.725, 0.7225, 0.6945, 0.742, 0.679, 0.7145, 0.736, 0.689, 0.726, 0.764],
        "naive": [0.5565, 0.3295, 0.603, 0.356, 0.616, 0.387, 0.573, 0.571, 0.5195, 0.5565, 0.4195, 0.5065,
                  0.4, 0.5405, 0.581, 0.431, 0.62, 0.5665, 0.535, 0.5205, 0.4925, 0.249, 0.5515, 0.472],
        "recipe": [0.61, 0.64, 0.6595, 0.6405, 0.638, 0.6725, 0.6335, 0.695, 0.639, 0.668, 0.6095, 0.6515,
                   0.675, 0.6625, 0.6595, 0.622, 0.645, 0.6365, 0.6455, 0.6625, 0.645, 0.644, 0.6635, 0.6335],
    },
    "Adam": {
        "baseline": [0.7315, 0.77, 0.781, 0.7625, 0.774, 0.801, 0.768, 0.774, 0.722, 0.7835, 0.7555, 0.738,
                     0.7735, 0.7235, 0.764, 0.78, 0.7225, 0.7715, 0.7275, 0.767, 0.7735, 0.736, 0.746, 0.784],
        "naive": [0.6935, 0.6975, 0.6915, 0.693, 0.6965, 0.698, 0.71, 0.6775, 0.731, 0.7235, 0.6955, 0.6895,
                  0.678, 0.68, 0.7305, 0.7355, 0.719, 0.677, 0.6765, 0.6825, 0.695, 0.631, 0.7005, 0.7345],
        "recipe": [0.7365, 0.753, 0.736, 0.7265, 0.74, 0.752, 0.7425, 0.739, 0.731, 0.7635, 0.733, 0.7185,
                   0.6805, 0.7105, 0.75, 0.752, 0.7645, 0.746, 0.754, 0.7205, 0.7545, 0.714, 0.7285, 0.77],
    },
}


class Recovery(NamedTuple):
    """The recovered fraction of one ladder, its 95 % interval and what it is made of (accuracies in 0..1)."""

    fraction: float
    low: float                    # -inf when the interval is unbounded
    high: float                   # +inf when the interval is unbounded
    seeds: int
    loss: tuple[float, float]     # baseline - naive: mean, 95 % half-width
    gain: tuple[float, float]     # recipe - naive: mean, 95 % half-width
    gap: tuple[float, float]      # baseline - recipe: mean, 95 % half-width (above 0 beyond its CI iff high < 1)


class Plan(NamedTuple):
    """The seeds a ladder needs, from the pilot (see :func:`plan_seeds`)."""

    seeds: int | None             # None: more than the design allows
    fraction: float               # the pilot's recovered fraction
    loss: float                   # the pilot's mean naive loss (accuracy)
    spread: float                 # standard deviation of recipe - naive - fraction x (baseline - naive)
    bound: float                  # its upper 90 % confidence bound
    aim: float                    # the half-width the design needs
    predicted: float              # predicted half-width of the fraction at the bound, on ``seeds`` seeds


def _paired(rows: Sequence[Sequence[Trial]], key: AccuracyKey) -> list[tuple[float, ...]]:
    """Per seed run by every row (in the first row's order), the rows' accuracies ``key``."""
    by_seed = [{t.seed: t.accuracy(key) for t in row} for row in rows]
    return [tuple(values[seed] for values in by_seed) for seed in by_seed[0]
            if all(seed in values for values in by_seed)]


def recovered_fraction(baseline: Sequence[Trial], naive: Sequence[Trial], recipe: Sequence[Trial],
                       key: AccuracyKey = "test_accuracy") -> Recovery:
    """``(recipe - naive) / (baseline - naive)`` over the seeds all three rows ran, with its Fieller interval.

    Args:
        baseline: Trials of the small-batch row.
        naive: Trials of the naive large-batch row.
        recipe: Trials of the large-batch recipe.
        key: The accuracy compared.

    Raises:
        ValueError: Fewer than 2 seeds common to the three rows.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    triples = _paired([baseline, naive, recipe], key)
    if len(triples) < 2:
        raise ValueError("the recovered fraction needs at least 2 seeds run by all three rows")
    gain = [r - n for _, n, r in triples]
    loss = [b - n for b, n, _ in triples]
    fraction, low, high = paired_ratio_ci95(gain, loss)
    gap = [b - r for b, _, r in triples]
    return Recovery(fraction, low, high, len(triples), mean_ci95(loss), mean_ci95(gain), mean_ci95(gap))


#: The answer's words, by where the interval lies against 0 (nothing recovered) and 1 (all of it).
_WORDS = {(True, True): "more than all of it", (True, False): "part of it, not all",
          (True, None): "cannot tell whether all", (None, False): "cannot tell whether any",
          (False, False): "none: the recipe is worse than naive", (None, None): CANNOT_TELL}


def recovery_word(recovery: Recovery) -> str:
    """How much of the loss the recipe recovers, in words decided by the interval against 0 and 1.

    ``"part of it, not all"`` when the whole interval lies between 0 and 1; ``"cannot tell whether all"`` when it
    lies above 0 and contains 1; ``"cannot tell whether any"`` when it contains 0 and lies below 1;
    ``"more than all of it"`` above 1; ``"none: ..."`` below 0; ``"cannot tell"`` when it contains both (an
    unbounded interval does).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if math.isnan(recovery.fraction):
        return CANNOT_TELL
    above_none = interval_verdict(recovery.low, recovery.high, 0.0)
    above_all = interval_verdict(recovery.low, recovery.high, 1.0)
    return _WORDS[(above_none, above_all)]


def _interval(recovery: Recovery) -> str:
    if math.isinf(recovery.low) or math.isinf(recovery.high):
        return "95 % interval unbounded: the naive loss itself is not resolved from 0"
    return f"95 % interval ≈{recovery.low:.2f} to ≈{recovery.high:.2f}"


def fraction_text(recovery: Recovery) -> str:
    """``"≈0.64 of the naive loss (95 % interval ≈0.47 to ≈0.82, 24 seeds)"``: the numbers without a verdict.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    return f"≈{recovery.fraction:.2f} of the naive loss ({_interval(recovery)}, {recovery.seeds} seeds)"


def recovery_line(ladder: str, recovery: Recovery) -> str:
    """The verdict line the notebook prints for one ladder (measured numbers marked ``≈``, the verdict in words).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    return f"{ladder}: the recipe recovers {fraction_text(recovery)} -> how much of the loss: {recovery_word(recovery)}"


#: What each answer means for a learner, in the summary.
_MEANING = {
    "part of it, not all": "at this budget the recipe brings the large batch only part of the way back to the "
                           "small batch",
    "cannot tell whether all": "it may bring the large batch all the way back: these seeds cannot tell",
    "cannot tell whether any": "these seeds cannot tell it from recovering nothing",
    "more than all of it": "the large batch with the recipe beats the small batch",
    "none: the recipe is worse than naive": "the recipe makes the large batch worse",
    CANNOT_TELL: "these seeds cannot tell how much",
}


def recovery_sentence(ladder: str, recovery: Recovery) -> str:
    """The summary's sentence for one ladder, chosen by :func:`recovery_word` (a test flips it).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    word = recovery_word(recovery)
    (loss, loss_half), (gap, gap_half) = recovery.loss, recovery.gap
    return (f"{ladder}: the naive 8x batch loses ≈{100 * loss:.1f} ± {100 * loss_half:.1f} points; the recipe "
            f"recovers ≈{recovery.fraction:.2f} of them ({_interval(recovery)}): {word}, so {_MEANING[word]} "
            f"(baseline minus recipe: ≈{100 * gap:.1f} ± {100 * gap_half:.1f} points).")


def seeds_needed(spread: float, half_width: float, most: int = 100) -> int | None:
    """The fewest seeds whose 95 % half-width, ``t(n-1) × spread / sqrt(n)``, is at most ``half_width``.

    Args:
        spread: Standard deviation per seed of the quantity whose mean is estimated.
        half_width: The half-width the design needs.
        most: Seeds beyond which the answer is ``None`` (this design cannot do it).

    Raises:
        ValueError: ``spread`` negative or ``half_width`` not positive.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if spread < 0 or half_width <= 0:
        raise ValueError(f"need spread >= 0 and half_width > 0, got {spread} and {half_width}")
    return next((n for n in range(2, most + 1) if t_critical_95(n - 1) * spread / math.sqrt(n) <= half_width),
                None)


def plan_seeds(pilot: Mapping[str, Sequence[float]], aim: float | None = None, most: int = 60) -> Plan:
    """The seeds a ladder needs for the recovered fraction's 95 % interval to be at most ``± aim``.

    The effect to resolve: the pilot's fraction ``f`` told apart from 0 (nothing recovered) and from 1 (all of
    it) with room to spare, so by default ``aim`` is half the distance from ``f`` to the nearer of the two.

    To first order the fraction's half-width is ``t(n-1) × s / (sqrt(n) × loss)``, where ``s`` is the
    standard deviation over seeds of ``(recipe - naive) - f × (baseline - naive)`` (the quantity whose mean
    Fieller's interval tests) and ``loss`` the mean naive loss. A spread measured on a pilot can be low by
    chance, so the seeds are chosen for its upper 90 % confidence bound (Browne 1995), not for ``s`` itself.

    Args:
        pilot: ``{"baseline": [...], "naive": [...], "recipe": [...]}``, accuracies per pilot seed in the same order.
        aim: The half-width the design needs (a fraction, e.g. 0.15); ``None``: ``min(f, 1 - f) / 2``.
        most: The most seeds the notebook's time allows; beyond it ``seeds`` is ``None``.

    Raises:
        ValueError: Rows of different lengths, fewer than 3 pilot seeds, a pilot whose naive row does not lose, or
            (without ``aim``) a pilot fraction outside (0, 1).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    base, naive, recipe = (list(pilot[row]) for row in ("baseline", "naive", "recipe"))
    if not len(base) == len(naive) == len(recipe) or len(base) < 3:
        raise ValueError("the pilot needs the three rows on the same seeds, at least 3 of them")
    loss = [b - n for b, n in zip(base, naive)]
    gain = [r - n for r, n in zip(recipe, naive)]
    mean_loss = statistics.fmean(loss)
    if mean_loss <= 0:
        raise ValueError("in the pilot the naive row does not lose: there is no loss to recover")
    fraction = statistics.fmean(gain) / mean_loss
    if aim is None:
        if not 0 < fraction < 1:
            raise ValueError(f"the pilot's fraction {fraction:.2f} is not between 0 and 1: give the aim yourself")
        aim = min(fraction, 1 - fraction) / 2
    spread = statistics.stdev([g - fraction * v for g, v in zip(gain, loss)])
    bound = spread_upper_bound(spread, len(loss))
    seeds = seeds_needed(bound / mean_loss, aim, most)
    predicted = t_critical_95(seeds - 1) * bound / math.sqrt(seeds) / mean_loss if seeds else math.nan
    return Plan(seeds, fraction, mean_loss, spread, bound, aim, predicted)
