"""Horovod's knobs measured one at a time: per-step times of a run, medians, "cannot tell".

A run of ``source_code/horovod_fmnist.py --json`` prints one ``epoch`` event per epoch with its
``step_time_ms`` (mean over the epoch's steps); the first epoch (graph tracing, first broadcast)
is marked ``warmup`` and left out. Each remaining epoch is one sample. Tables show the median
and the interquartile range. Two variants are told apart only when *every* sample of one is
below every sample of the other (the ranges do not overlap): with 4 samples each, two runs of
the same thing do that by chance with probability 2 / C(8, 4) ≈ 3 % (an exact rank test).
Otherwise the verdict is "cannot tell": the difference is inside this machine's noise. The rule is
the course's one decision rule (:func:`course_lib.training.stats.interval_verdict`) applied to the
range of the differences variant − baseline, ``[min(variant) − max(baseline), max(variant) − min(baseline)]``,
against 0: a range that does not contain 0 is two sets that do not overlap.

Runs that are launched one after the other drift with the machine (another program starts, the VM slows), so a
comparison of two settings alternates them in rounds, A B B A (:func:`abba_order`), and pairs each epoch of a
variant with the same epoch of the baseline in the same round (:func:`paired_compare`): the mean of the paired
differences and its 95 % interval (Student's t), decided against 0 with the same rule.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from course_lib.lessons.common.measured import in_words
from course_lib.training.stats import ci_verdict, interval_verdict, mean_ci95

if TYPE_CHECKING:
    import pandas

__all__ = ["step_samples", "summarise", "compare", "knob_table", "plot_knobs", "abba_order", "paired_compare",
           "PairedEffect", "plot_paired"]


def step_samples(epochs: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """Milliseconds per step of every epoch that is not a warm-up epoch.

    Args:
        epochs: The run's ``epoch`` events (``RunResult.epochs``).

    Returns:
        One sample per epoch, in order.

    Raises:
        ValueError: If no epoch after the warm-up carries ``step_time_ms`` (run more epochs, or
            with ``--json``).
    """
    samples = [float(e["step_time_ms"]) for e in epochs
               if not e.get("warmup") and e.get("step_time_ms") is not None]
    if not samples:
        raise ValueError("no timed epoch after the warm-up: run with --json and --epochs >= 2")
    return np.asarray(samples)


def summarise(samples: Sequence[float]) -> dict[str, float]:
    """Median and quartiles (``median``, ``q1``, ``q3``) and the number of samples ``n``."""
    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        raise ValueError("no samples to summarise")
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3), "n": int(values.size)}


def compare(baseline: Sequence[float], variant: Sequence[float]) -> dict[str, Any]:
    """How a variant's step time compares with the baseline's.

    Returns:
        ``ratio`` (median variant / median baseline), ``verdict``: ``"slower"`` or
        ``"faster"`` when the two sets of samples do not overlap at all, else
        ``"cannot tell"``; and ``inside_noise`` (the verdict is "cannot tell").
    """
    a, b = summarise(baseline), summarise(variant)
    slower = interval_verdict(min(variant) - max(baseline), max(variant) - min(baseline), 0.0)
    verdict = in_words(slower, "slower", "faster")
    return {"ratio": b["median"] / a["median"], "verdict": verdict, "inside_noise": slower is None}


def knob_table(samples: Mapping[str, Sequence[float]], baseline: str) -> "pandas.DataFrame":
    """One row per variant: median ms/step, IQR, ratio to the baseline and the verdict.

    Args:
        samples: ``{label: per-epoch ms/step}``, the baseline among them.
        baseline: The label of the baseline.

    Raises:
        KeyError: If ``baseline`` is not a key of ``samples``.
    """
    import pandas as pd

    if baseline not in samples:
        raise KeyError(f"baseline {baseline!r} is not one of {sorted(samples)}")
    rows = []
    for label, values in samples.items():
        s = summarise(values)
        c = compare(samples[baseline], values)
        rows.append({"variant": label, "ms_per_step": s["median"], "q1": s["q1"], "q3": s["q3"],
                     "epochs": s["n"], "vs_baseline": c["ratio"],
                     "verdict": "baseline" if label == baseline else c["verdict"]})
    return pd.DataFrame(rows)


def plot_knobs(samples: Mapping[str, Sequence[float]], baseline: str, ax: Any = None) -> Any:
    """Every variant's per-epoch step times (dots), median and IQR (bar), verdict vs baseline.

    Returns:
        The Axes (display its figure; do not return it bare from a cell).
    """
    import matplotlib.pyplot as plt

    table = knob_table(samples, baseline)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.6 * len(table) + 1.2))
    for y, row in table.iterrows():
        ax.plot(samples[row["variant"]], [y] * len(samples[row["variant"]]), "o", color="C0",
                alpha=0.5)
        ax.errorbar(row["ms_per_step"], y, xerr=[[row["ms_per_step"] - row["q1"]],
                                                  [row["q3"] - row["ms_per_step"]]],
                    fmt="s", color="black", capsize=4)
        ax.annotate(f" {row['verdict']} ({row['vs_baseline']:.2f}x)",
                    (max(samples[row["variant"]]), y), va="center", fontsize=8)
    ax.set_yticks(range(len(table)))
    ax.set_yticklabels(table["variant"])
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (dots: one epoch each; square and bar: median and IQR)")
    ax.set_title("Step time per variant; verdict vs the baseline (ranges overlap: cannot tell)")
    ax.grid(True, axis="x", alpha=0.3)
    return ax


def abba_order(labels: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """The launch order of an interleaved comparison: ``(round, label)``, the labels reversed every other round.

    ``abba_order(["A", "B"], 2)`` is A, B, B, A: a drift that is linear in time moves both sides alike.

    Raises:
        ValueError: ``rounds < 1``, no labels, or a repeated label.
    """
    if rounds < 1 or not labels or len(set(labels)) != len(labels):
        raise ValueError(f"need rounds >= 1 and distinct labels, got {rounds} and {list(labels)}")
    return [(r, label) for r in range(rounds) for label in (labels if r % 2 == 0 else list(labels)[::-1])]


@dataclass(frozen=True)
class PairedEffect:
    """A variant against the baseline, from epochs paired within each round.

    Attributes:
        difference_ms: Mean of (variant − baseline) over the pairs, ms per step.
        ci95_ms: Half-width of its 95 % interval.
        ratio: Mean variant / mean baseline over the same epochs.
        pairs: How many pairs.
        verdict: ``"slower"`` / ``"faster"`` (the interval excludes 0) or ``"cannot tell"``.
    """

    difference_ms: float
    ci95_ms: float
    ratio: float
    pairs: int
    verdict: str


def paired_compare(rounds: Sequence[tuple[Sequence[float], Sequence[float]]]) -> PairedEffect:
    """A variant against its baseline from interleaved rounds, each ``(baseline epochs, variant epochs)``.

    Epoch k of the variant is paired with epoch k of the baseline of the same round (both are the k-th timed
    epoch of a run launched next to the other); rounds with unequal epoch counts pair the common ones.

    Raises:
        ValueError: Fewer than two pairs.
    """
    diffs: list[float] = []
    base: list[float] = []
    var: list[float] = []
    for a, b in rounds:
        n = min(len(a), len(b))
        diffs += [float(y) - float(x) for x, y in zip(a[:n], b[:n])]
        base += [float(x) for x in a[:n]]
        var += [float(y) for y in b[:n]]
    if len(diffs) < 2:
        raise ValueError(f"need at least two paired epochs, got {len(diffs)}")
    mean, half = mean_ci95(diffs)
    slower = ci_verdict(mean, half, 0.0)
    verdict = in_words(slower, "slower", "faster")
    return PairedEffect(mean, half, float(np.mean(var) / np.mean(base)), len(diffs), verdict)


def plot_paired(rounds: Mapping[str, Sequence[Sequence[float]]], baseline: str, effect: PairedEffect,
                ax: Any = None) -> Any:
    """Each round's epochs of both variants side by side, and the paired difference the verdict used.

    Args:
        rounds: ``{label: [epochs of round 0, epochs of round 1, ...]}``, two labels, the baseline among them.
        baseline: The label the difference is taken against.
        effect: :func:`paired_compare`'s result for the other label against ``baseline``.

    Returns:
        The Axes (display its figure; do not return it bare from a cell).
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 2.8))
    labels = [baseline] + [k for k in rounds if k != baseline]
    for y, label in enumerate(labels):
        for r, samples in enumerate(rounds[label]):
            ax.plot(samples, [y + 0.12 * (r - (len(rounds[label]) - 1) / 2)] * len(samples), "o",
                    color=f"C{r}", alpha=0.7, label=f"round {r + 1}" if y == 0 else None)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (one dot per timed epoch; colour: the round, A B B A)")
    ax.set_title(f"{labels[-1]} − {baseline}, epochs paired within a round: {effect.difference_ms:+.1f} ± "
                 f"{effect.ci95_ms:.1f} ms ({effect.verdict})", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return ax
