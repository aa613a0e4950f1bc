"""Launched runs compared in alternating rounds: each timed epoch paired with its neighbour's.

Two separate launches measured minutes apart differ by whatever else the machine did meanwhile. So
notebook 03 launches its runs in rounds whose order alternates (A B, then B A: "ABBA", a palindrome),
so a slow drift of the machine falls on both sides alike, and pairs every timed epoch of a run with
the same epoch of the run next to it in its round. The ratio of each pair is one sample; their mean
and its 95 % interval (:func:`course_lib.training.stats.mean_ci95`) are the comparison, and the verdict
is the course's one rule (:func:`course_lib.lessons.common.measured.at_least`): ``True``, ``False`` or
``cannot tell``. Runs measured side by side inside ONE process (``mirrored_fmnist.py --ceiling``)
pair the same way, epoch by epoch.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeVar

from course_lib.lessons.common.measured import at_least, in_words
from course_lib.training.stats import ci_verdict, mean_ci95

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = ["round_order", "Paired", "timed_rates", "paired_ratio", "paired_scaling_table", "speed_sentence"]

T = TypeVar("T")


def round_order(variants: Sequence[T], index: int) -> list[T]:
    """The order in which round ``index`` runs ``variants``: as given in even rounds, reversed in odd ones.

    This is ABBA (A B, B A, …) for any number of variants (A B C, C B A, …): over every pair of rounds
    each variant sits on average in the same position, so a drift of the machine that grows steadily
    through the measurement, or a cost of going first, moves every variant alike. With an even number
    of rounds the whole design is balanced.

    Args:
        variants: The variants of one round, in their base order.
        index: The round, 0-based.

    Returns:
        A new list: ``variants`` in the order of that round.
    """
    return list(variants) if index % 2 == 0 else list(variants)[::-1]


@dataclass(frozen=True)
class Paired:
    """A ratio measured on pairs: the mean of the pairs' ratios and its 95 % interval.

    Attributes:
        mean: Mean of the per-pair ratios.
        ci95: Half-width of its 95 % interval (NaN with one pair).
        pairs: Number of pairs.
    """

    mean: float
    ci95: float
    pairs: int

    def at_least(self, threshold: float = 1.0) -> str:
        """``"True"``, ``"False"`` or ``"cannot tell"``: is the ratio at least ``threshold``?"""
        return at_least(self.mean, self.ci95, threshold)


def timed_rates(run: Any, label: str | None = None) -> list[float]:
    """Images/s of every timed epoch of a launched run (its warm-up epochs left out), in order.

    Args:
        run: The launcher's :class:`course_lib.runner.runlog.RunResult` of a course script run with ``--json``.
        label: Only the epochs of this run name (``"ceiling"`` or ``"mirrored"`` of
            ``mirrored_fmnist.py --ceiling``); ``None``: every epoch.

    Returns:
        The rates, in the order the epochs ran.

    Raises:
        ValueError: The run reported no timed epoch (of that name).
    """
    rates = [float(e["images_per_sec"]) for e in run.epochs
             if not e.get("warmup") and (label is None or e.get("run") == label)]
    if not rates:
        raise ValueError(f"the run reported no timed epoch{f' named {label!r}' if label else ''}: run the script "
                         "with --json and more epochs than its warm-up")
    return rates


def paired_ratio(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> Paired:
    """``numerator / denominator`` epoch by epoch, over every round.

    Args:
        pairs: One ``(numerator rates, denominator rates)`` per round, each list of the same length:
            epoch ``j`` of one run over epoch ``j`` of the run next to it.

    Returns:
        The :class:`Paired` ratio.

    Raises:
        ValueError: No pairs, lists of different lengths, or a rate that is not positive.
    """
    ratios: list[float] = []
    for numerator, denominator in pairs:
        if len(numerator) != len(denominator):
            raise ValueError(f"paired runs need the same number of timed epochs, got {len(numerator)} and "
                             f"{len(denominator)}: run both with the same --epochs")
        for a, b in zip(numerator, denominator):
            if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
                raise ValueError(f"rates must be positive numbers, got {a!r} and {b!r}")
            ratios.append(a / b)
    if not ratios:
        raise ValueError("paired_ratio needs at least one pair of epochs")
    mean, half = mean_ci95(ratios)
    return Paired(mean, half, len(ratios))


def paired_scaling_table(rounds: Sequence[Mapping[int, Any]]) -> "pandas.DataFrame":
    """Speed-up and efficiency of N workers over 1, paired within each round.

    Args:
        rounds: One ``{workers: RunResult}`` per round, in the order they ran; each holds a 1-worker run.

    Returns:
        A table with the columns of :func:`course_lib.lessons.common.scaling.scaling_table` (so
        :func:`~course_lib.lessons.common.scaling.plot_scaling` draws it) plus ``pairs``: per worker count its
        images/s (mean of all its timed epochs, with their 95 % interval), and the speed-up and efficiency
        paired epoch by epoch with the 1-worker run of the same round, with THEIR interval.

    Raises:
        ValueError: No rounds, a round without a 1-worker run, or runs without timed epochs.
    """
    import pandas as pd

    if not rounds or any(1 not in r for r in rounds):
        raise ValueError("every round needs a 1-worker run (the baseline of the speed-up)")
    rows = []
    for n in sorted({n for r in rounds for n in r}):
        runs = [r[n] for r in rounds if n in r]
        mean, half = mean_ci95([rate for run in runs for rate in timed_rates(run)])
        speedup = (Paired(1.0, 0.0, 0) if n == 1 else
                   paired_ratio([(timed_rates(r[n]), timed_rates(r[1])) for r in rounds if n in r]))
        result = runs[0].result or {}
        rows.append({"devices": n, "per_device_batch": result.get("per_worker_batch"),
                     "global_batch": result.get("global_batch"), "images_per_sec": mean,
                     "speedup": speedup.mean, "efficiency": speedup.mean / n,
                     "mode": "weak", "runs": len(runs), "efficiency_ci95": speedup.ci95 / n,
                     "images_per_sec_ci95": half, "pairs": speedup.pairs})
    table = pd.DataFrame(rows)
    if table["per_device_batch"].nunique() > 1:
        table["mode"] = "strong" if table["global_batch"].nunique() == 1 else "mixed"
    return table


def speed_sentence(a: str, b: str, ratio: Paired) -> str:
    """The ``measured:`` sentence that says which of two runs was faster, decided by ``ratio`` = a / b.

    The verdict is :func:`course_lib.training.stats.ci_verdict` of the ratio against 1: faster when the whole
    interval lies above 1, slower when it lies below, "cannot tell" when it contains 1 (or has no width).

    Returns:
        ``"measured: <a> against <b>: ≈r ± h times the images/s (n paired epochs): <a> is faster here"``
        (or ``slower``, or ``cannot tell which is faster here``).
    """
    verdict = ci_verdict(ratio.mean, ratio.ci95, 1.0)
    words = in_words(verdict, f"{a} is faster here", f"{a} is slower here", "cannot tell which is faster here")
    return (f"measured: {a} against {b}: ≈{ratio.mean:.2f} ± {ratio.ci95:.2f} times the images/s "
            f"({ratio.pairs} paired epochs): {words}")
