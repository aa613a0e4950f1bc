"""Launched runs compared in alternating rounds: each launch paired with its neighbour in the round.

Two separate launches measured minutes apart differ by whatever else the machine did meanwhile. So
notebooks 03 and 07 launch their runs in rounds whose order alternates (A B, then B A: "ABBA", a palindrome),
so a slow drift of the machine falls on both sides alike, and pair each launch with the launch of the other
variant in its round. The unit is the launch: the epochs of one launch share its start-up, its placement and
the machine's state, so they are not independent samples (the launch that ran second in a round was 25-30 %
slower in one recording of notebook 07, in every epoch). :func:`launch_ratio` takes one ratio per round, of
the two launches' mean timed images/s; their mean and its 95 % interval (:func:`course_lib.training.stats.mean_ci95`)
are the comparison, and the verdict is the course's one rule (:func:`course_lib.lessons.common.measured.at_least`):
``True``, ``False`` or ``cannot tell``. It refuses a launch used twice on one side. :func:`paired_ratio` pairs
lists of rates (rounds of one process, notebook 02's in-process configurations) and names its unit.

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

__all__ = ["round_order", "Paired", "timed_rates", "launch_rate", "launch_ratio", "paired_ratio",
           "paired_scaling_table", "speed_sentence"]

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
        unit: What one pair is (``"rounds"``: one launch of each side per round), as printed after ``pairs``.
    """

    mean: float
    ci95: float
    pairs: int
    unit: str = "paired epochs"

    def samples(self) -> str:
        """``"4 rounds"``: how many pairs, of what (the printed unit of the interval)."""
        return f"{self.pairs} {self.unit}"

    def at_least(self, threshold: float = 1.0) -> str:
        """``"True"``, ``"False"`` or ``"cannot tell"``: is the ratio at least ``threshold``?"""
        return at_least(self.mean, self.ci95, threshold)


def timed_rates(run: Any, label: str | None = None) -> list[float]:
    """Images/s of every timed epoch of a launched run (its warm-up epochs left out), in order.

    A run whose epochs several processes report (the copies of a bound run,
    :func:`course_lib.runner.multiworker.run_bound`) has, per epoch, the sum of their images/s: they trained at the
    same time, each its own shard. A Horovod or DDP run's epochs are reported by rank 0 alone, already for all
    workers.

    Args:
        run: The launcher's :class:`course_lib.runner.runlog.RunResult` of a course script run with ``--json``.
        label: Only the epochs of this run name (an ``epoch`` event's ``"run"``); ``None``: every epoch.

    Returns:
        The rates, in the order the epochs ran.

    Raises:
        ValueError: The run reported no timed epoch (of that name), or its processes reported different numbers
            of timed epochs.
    """
    def timed(events: Sequence[dict]) -> list[float]:
        return [float(e["images_per_sec"]) for e in events
                if not e.get("warmup") and (label is None or e.get("run") == label)]

    by_rank: dict[int, list[dict]] = {}
    for rank, event in getattr(run, "events", None) or []:
        if event.get("event") == "epoch":
            by_rank.setdefault(rank, []).append(event)
    if len(by_rank) > 1:
        per_rank = [timed(events) for _, events in sorted(by_rank.items())]
        if len({len(rates) for rates in per_rank}) != 1:
            raise ValueError(f"the processes of this run reported {[len(r) for r in per_rank]} timed epochs; a bound's "
                             "copies must run the same epochs (the same --epochs and training subset)")
        rates = [math.fsum(epoch) for epoch in zip(*per_rank)]
    else:
        rates = timed(run.epochs)
    if not rates:
        raise ValueError(f"the run reported no timed epoch{f' named {label!r}' if label else ''}: run the script "
                         "with --json and more epochs than its warm-up")
    return rates


def launch_rate(run: Any, label: str | None = None) -> float:
    """One launch's images/s: the mean of its timed epochs (:func:`timed_rates`)."""
    rates = timed_rates(run, label)
    return math.fsum(rates) / len(rates)


def launch_ratio(rounds: Sequence[tuple[Any, Any]], unit: str = "rounds") -> Paired:
    """``numerator / denominator`` launch by launch: one ratio per round, of the two launches' images/s.

    Args:
        rounds: One ``(numerator launch, denominator launch)`` per round (``RunResult``s).
        unit: What a pair is, as printed (``"rounds"``).

    Returns:
        The :class:`Paired` ratio over the rounds (its interval needs at least 2 rounds).

    Raises:
        ValueError: No rounds, a launch paired with itself or used in two rounds on the same side (its epochs
            would count twice as independent samples), or a launch without timed epochs.
    """
    if not rounds:
        raise ValueError("launch_ratio needs at least one round")
    seen: list[set[int]] = [set(), set()]
    ratios = []
    for numerator, denominator in rounds:
        if numerator is denominator:
            raise ValueError("a launch cannot be paired with itself: pair launches of two variants in one round")
        for side, one in zip(seen, (numerator, denominator)):
            if id(one) in side:
                raise ValueError("the same launch appears in two rounds: each round pairs launches of its own "
                                 "(its epochs are not independent samples)")
            side.add(id(one))
        ratios.append(launch_rate(numerator) / launch_rate(denominator))
    mean, half = mean_ci95(ratios)
    return Paired(mean, half, len(ratios), unit)


def paired_ratio(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], unit: str = "paired epochs") -> Paired:
    """``numerator / denominator`` element by element, over every pair of lists.

    Args:
        pairs: ``(numerator rates, denominator rates)`` lists of the same length: element ``j`` of one over
            element ``j`` of the other (notebook 02: round ``j`` of two configurations trained in one process).
        unit: What one element is, as printed (``"paired epochs"``, ``"rounds"``).

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
    return Paired(mean, half, len(ratios), unit)


def paired_scaling_table(rounds: Sequence[Mapping[int, Any]]) -> "pandas.DataFrame":
    """Speed-up and scaling efficiency of N workers over 1, launch paired with launch within each round.

    Args:
        rounds: One ``{workers: RunResult}`` per round, in the order they ran; each holds a 1-worker run.

    Returns:
        A table with the columns of :func:`course_lib.lessons.common.scaling.scaling_table` (so
        :func:`~course_lib.lessons.common.scaling.plot_scaling` draws it) plus ``rounds``: per worker count its
        images/s (mean of its launches' images/s, with their 95 % interval over launches), and the speed-up and
        efficiency (speed-up / N) of each round's launch over the 1-worker launch of the same round
        (:func:`launch_ratio`), with THEIR interval over rounds.

    Raises:
        ValueError: No rounds, a round without a 1-worker run, or runs without timed epochs.
    """
    import pandas as pd

    if not rounds or any(1 not in r for r in rounds):
        raise ValueError("every round needs a 1-worker run (the baseline of the speed-up)")
    rows = []
    for n in sorted({n for r in rounds for n in r}):
        runs = [r[n] for r in rounds if n in r]
        mean, half = mean_ci95([launch_rate(run) for run in runs])
        speedup = Paired(1.0, 0.0, 0) if n == 1 else launch_ratio([(r[n], r[1]) for r in rounds if n in r])
        result = runs[0].result or {}
        rows.append({"devices": n, "per_device_batch": result.get("per_worker_batch"),
                     "global_batch": result.get("global_batch"), "images_per_sec": mean,
                     "speedup": speedup.mean, "efficiency": speedup.mean / n,
                     "mode": "weak", "runs": len(runs), "efficiency_ci95": speedup.ci95 / n,
                     "images_per_sec_ci95": half, "rounds": speedup.pairs})
    table = pd.DataFrame(rows)
    if table["per_device_batch"].nunique() > 1:
        table["mode"] = "strong" if table["global_batch"].nunique() == 1 else "mixed"
    return table


def speed_sentence(a: str, b: str, ratio: Paired) -> str:
    """The ``measured:`` sentence that says which of two runs was faster, decided by ``ratio`` = a / b.

    The verdict is :func:`course_lib.training.stats.ci_verdict` of the ratio against 1: faster when the whole
    interval lies above 1, slower when it lies below, "cannot tell" when it contains 1 (or has no width).

    Returns:
        ``"measured: <a> against <b>: ≈r ± h times the images/s (n rounds): <a> is faster here"``
        (or ``slower``, or ``cannot tell which is faster here``).
    """
    verdict = ci_verdict(ratio.mean, ratio.ci95, 1.0)
    words = in_words(verdict, f"{a} is faster here", f"{a} is slower here", "cannot tell which is faster here")
    return (f"measured: {a} against {b}: ≈{ratio.mean:.2f} ± {ratio.ci95:.2f} times the images/s "
            f"({ratio.samples()}): {words}")
