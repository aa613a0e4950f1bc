"""Adam's learning rate at an 8× batch: the square-root rule against linear scaling, decided on validation.

The course scales Adam's rate by √N (:func:`course_lib.training.schedules.scaled_lr`; Malladi et al. 2022,
arXiv:2205.10287), while Horovod's examples and the bootcamp scale it linearly, with a warm-up. Notebook 04
runs both rules on the Adam ladder's seeds and budget, one rung each (the same batch, warm-up and updates;
only the peak rate differs), and puts them side by side: the paired difference of their final VALIDATION
accuracies, √N minus linear, seed by seed (:func:`course_lib.lessons.large_batch.ladder_verdicts.paired_difference`).
Choosing a rule is tuning, so the test set is never read for it. The verdict "√N beats linear here" is
:func:`course_lib.training.stats.ci_verdict` against 0 in the course's words
(:func:`course_lib.lessons.common.measured.in_words`): ``True``, ``False`` or ``cannot tell``.

The seeds are the Adam ladder's; :data:`PILOT` (seeds 200–223, which the ladders do not use; how to run it
again: ``instructor/notes/04_large_batch.md``) says which difference they can resolve (:func:`plan`).
Nothing here imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
import statistics
from typing import Mapping, NamedTuple, Sequence

from course_lib.lessons.common.measured import in_words
from course_lib.lessons.large_batch.ladder_verdicts import paired_difference
from course_lib.lessons.large_batch.trials import Trial
from course_lib.training.stats import ci_verdict, spread_upper_bound, t_critical_95

__all__ = ["PILOT", "RuleComparison", "RulePlan", "compare_rules", "rule_verdict", "rule_line", "rule_sentence",
           "plan"]

#: Final validation accuracy per pilot seed (200–223, in order) of the two Adam rungs on notebook 04's budget
#: (1 536 training images, the next 500 as validation, 2 epochs, batch 128 from a base of 16, warm-up over 6 of
#: the 24 updates, the narrow CNN): ``"sqrt"`` peaks at 0.001 × √8, ``"linear"`` at 0.001 × 8. Measured
#: 2026-12-02 on the 2-core VM (instructor/notes/04_large_batch.md).
PILOT: dict[str, list[float]] = {
    "sqrt": [0.756, 0.772, 0.742, 0.766, 0.768, 0.764, 0.772, 0.742, 0.746, 0.774, 0.76, 0.736,
             0.68, 0.712, 0.778, 0.79, 0.806, 0.772, 0.786, 0.752, 0.768, 0.726, 0.736, 0.808],
    "linear": [0.772, 0.796, 0.764, 0.764, 0.792, 0.79, 0.784, 0.768, 0.788, 0.77, 0.796, 0.806,
               0.742, 0.758, 0.782, 0.792, 0.784, 0.806, 0.81, 0.762, 0.776, 0.774, 0.8, 0.778],
}


class RuleComparison(NamedTuple):
    """√N minus linear, final validation accuracy (0..1), paired over seeds: mean, 95 % half-width, seeds."""

    difference: float
    half_width: float
    seeds: int
    sqrt_lr: float
    linear_lr: float

    @property
    def growth(self) -> int:
        """The batch's growth N: the linear rate over the √N one is √N."""
        return round((self.linear_lr / self.sqrt_lr) ** 2)


class RulePlan(NamedTuple):
    """What the pilot says about a design of ``seeds`` seeds (accuracies in 0..1)."""

    difference: float        # the pilot's mean of √N - linear
    spread: float            # its standard deviation per seed
    bound: float             # the spread's upper 90 % confidence bound
    seeds: int               # the seeds of the design
    predicted: float         # the 95 % half-width predicted at the bound on ``seeds`` seeds


def compare_rules(sqrt_runs: Sequence[Trial], linear_runs: Sequence[Trial]) -> RuleComparison:
    """The paired difference √N − linear of the final validation accuracies, over the seeds both rungs ran.

    Raises:
        ValueError: Fewer than 2 common seeds.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    mean, half = paired_difference(sqrt_runs, linear_runs, key="val_accuracy")
    common = {t.seed for t in sqrt_runs} & {t.seed for t in linear_runs}
    return RuleComparison(mean, half, len(common), sqrt_runs[0].lr, linear_runs[0].lr)


def rule_verdict(found: RuleComparison) -> str:
    """``"True"`` when √N's validation accuracy is above linear's beyond the 95 % interval, ``"False"`` when below,
    ``"cannot tell"`` when the interval contains 0.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    return in_words(ci_verdict(found.difference, found.half_width, 0.0), "True", "False")


def rule_line(found: RuleComparison) -> str:
    """The line notebook 04 prints: the measured difference (``≈``, masked by nbval) and the verdict (compared).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    n = found.growth
    return (f"measured: Adam at {n}x the batch, peak rate {found.sqrt_lr:.5f} (√{n}) against {found.linear_lr:.5f} "
            f"({n}x): validation accuracy √{n} minus {n}x ≈{100 * found.difference:.2f} ± "
            f"{100 * found.half_width:.2f} points "
            f"(95 % interval, {found.seeds} paired seeds) -> the square-root rule beats linear scaling here: "
            f"{rule_verdict(found)}")


#: What each verdict lets the summary say (a mechanism only as a proposal: none is measured here).
_SAYS = {
    "True": "The square-root rule is better for Adam here; the usual reason, that Adam already divides each step by "
            "the gradient's recent size, so a larger batch does not call for a proportionally larger step, fits it "
            "(proposed, not measured here).",
    "False": "Linear scaling is better for Adam at this budget, the rule of Horovod's examples and the bootcamp: the "
             "course's square-root rule left accuracy on the table here (with few updates and a warm-up, the larger "
             "step may simply make more progress; proposed, not measured here).",
    "cannot tell": "These seeds cannot tell the two rules apart at this budget.",
}


def rule_sentence(found: RuleComparison) -> str:
    """The summary's sentence, chosen by :func:`rule_verdict` (a test flips it).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    verdict, n = rule_verdict(found), found.growth
    return (f"**Adam, √{n} or {n}x?** On validation, √{n} minus {n}x is ≈{100 * found.difference:.2f} ± "
            f"{100 * found.half_width:.2f} points; the square-root rule beats linear scaling here: {verdict}. "
            f"{_SAYS[verdict]}")


def plan(pilot: Mapping[str, Sequence[float]], seeds: int) -> RulePlan:
    """The 95 % half-width that ``seeds`` paired seeds give for √N − linear, at the upper 90 % bound of the
    pilot's spread per seed (:func:`course_lib.training.stats.spread_upper_bound`): a difference smaller than it
    is likely to come out "cannot tell".

    Args:
        pilot: ``{"sqrt": [...], "linear": [...]}``, validation accuracies per pilot seed in the same order.
        seeds: Seeds of the design, >= 2.

    Raises:
        ValueError: Rows of different lengths, fewer than 3 pilot seeds, or ``seeds < 2``.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    sqrt_row, linear_row = list(pilot["sqrt"]), list(pilot["linear"])
    if len(sqrt_row) != len(linear_row) or len(sqrt_row) < 3 or seeds < 2:
        raise ValueError(f"need two pilot rows of the same length >= 3 and seeds >= 2, got "
                         f"{len(sqrt_row)}, {len(linear_row)} and {seeds}")
    differences = [s - lin for s, lin in zip(sqrt_row, linear_row)]
    spread = statistics.stdev(differences)
    bound = spread_upper_bound(spread, len(differences))
    return RulePlan(statistics.fmean(differences), spread, bound, seeds,
                    t_critical_95(seeds - 1) * bound / math.sqrt(seeds))
