"""Time to a target accuracy: the images a batch needs to reach it, the images/s it runs, which gets there first.

A ladder's rows are compared on an accuracy target fixed before the runs (:func:`target_from_baseline`: a
fraction of the baseline's validation accuracy). :func:`images_ratio` says how many times the small batch's
images the large batch needs to reach it, :func:`paired_speed_ratio` how many times the small batch's images/s
it runs (paired round by round), and :func:`time_to_target_winner` which of the two is first in time. Nothing
here imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
from typing import Sequence

from course_lib.lessons.common.measured import in_words
from course_lib.lessons.large_batch.trials import Trial
from course_lib.training.stats import interval_verdict, mean_ci95

__all__ = ["updates_to_target", "target_from_baseline", "images_ratio", "paired_speed_ratio",
           "time_to_target_winner"]


def updates_to_target(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """Updates done when the validation accuracy first reached ``target`` (``None``: never).

    Args:
        curve: ``[(updates, accuracy), ...]`` in order (one point per validation check).
        target: Accuracy in 0..1, fixed before the runs.

    Raises:
        ValueError: ``target`` outside 0..1.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"target must be an accuracy in 0..1, got {target}")
    return next((int(updates) for updates, accuracy in curve if accuracy >= target), None)


def target_from_baseline(baseline: Sequence[Trial], fraction: float) -> float:
    """The accuracy target of updates-to-target: ``fraction`` × the baseline's mean final VALIDATION
    accuracy (a rule fixed before the runs; the test set is not read).

    Args:
        baseline: The baseline row's trials.
        fraction: In (0, 1], e.g. 0.9.

    Raises:
        ValueError: ``fraction`` outside (0, 1], or no trials.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if not baseline:
        raise ValueError("the baseline has no trials")
    return fraction * sum(float(t.val_accuracy) for t in baseline) / len(baseline)


def images_ratio(large: Sequence[Trial], small: Sequence[Trial], large_batch: int, small_batch: int,
                 target: float) -> tuple[float, float] | None:
    """Images the large batch needs to reach ``target`` over those the small batch needs, seed by seed.

    Returns:
        Mean ± 95 % CI half-width of the per-seed ratio (NaN half-width for one seed), or ``None`` when
        a run of either row never reached the target.

    Raises:
        ValueError: The two rows have no seed in common.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    by_seed = {t.seed: updates_to_target(t.val_curve, target) for t in small}
    ratios = []
    for trial in large:
        if trial.seed not in by_seed:
            continue
        reach_large, reach_small = updates_to_target(trial.val_curve, target), by_seed[trial.seed]
        if reach_large is None or reach_small is None:
            return None
        ratios.append(reach_large * large_batch / (reach_small * small_batch))
    if not ratios:
        raise ValueError("the two rows have no seed in common")
    return mean_ci95(ratios)


def paired_speed_ratio(ladders: Sequence[tuple[Sequence[Trial], Sequence[Sequence[Trial]]]],
                       images_per_epoch: int) -> tuple[float, float]:
    """How many times the images/s of the small batch the large batch runs, paired round by round.

    A round is one seed's runs of one ladder, made one after the other (in alternating order from round to
    round, so that a drift of the machine slows both batches alike). The ratio is taken within each round (the
    large-batch runs' mean images/s over the small-batch run's) and averaged over the rounds of every ladder.

    Args:
        ladders: Per ladder, ``(small-batch trials, [large-batch trials of each large row])``.
        images_per_epoch: Training images of one epoch.

    Returns:
        Mean ratio and its 95 % CI half-width over the rounds.

    Raises:
        ValueError: No round (no seed run by the small row and every large row of a ladder).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    def rate(trial: Trial) -> float:
        return images_per_epoch * len(trial.epoch_s) / math.fsum(trial.epoch_s)

    ratios = []
    for small, large in ladders:
        by_seed = [{t.seed: rate(t) for t in row} for row in large]
        ratios += [sum(row[t.seed] for row in by_seed) / len(by_seed) / rate(t) for t in small
                   if all(t.seed in row for row in by_seed)]
    if not ratios:
        raise ValueError("no round: the small-batch rows and the large-batch rows have no seed in common")
    return mean_ci95(ratios)


def time_to_target_winner(images: tuple[float, float] | None, speed: tuple[float, float]) -> str:
    """Which batch reaches the target first in time, from the images it needs and the images/s it runs.

    The large batch needs ``images`` × the small batch's images (mean, CI half-width) and processes
    ``speed`` × its images per second (mean, CI half-width), so it is first when the images ratio is
    below the speed ratio. Both intervals must be apart for a winner.

    Returns:
        ``"large batch"``, ``"small batch"`` or ``"cannot tell"`` (``"small batch"`` when the large batch
        never reached the target: ``images`` is ``None``).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if images is None:
        return "small batch"
    (ratio, ratio_half), (rate, rate_half) = images, speed
    ratio_half, rate_half = (0.0 if math.isnan(h) else h for h in (ratio_half, rate_half))
    first = interval_verdict(ratio - ratio_half - (rate + rate_half), ratio + ratio_half - (rate - rate_half),
                             0.0)
    return in_words(first, "small batch", "large batch")
