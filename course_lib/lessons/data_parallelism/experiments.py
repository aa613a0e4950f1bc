"""Live single-device experiments shown in the notebooks.

:func:`batch_size_sweep` measures the course CNN's training images/s at several batch sizes on one device, with
the course's ``Throughput`` callback (images that really ran, warm-up epochs left out). The batch sizes train one
epoch each per round, in the order of :func:`~course_lib.lessons.common.paired_runs.round_order` (ABC, CBA, …:
ABBA), so a slowdown of the machine moves all of them; :meth:`BatchSweep.compare` puts two batch sizes against
each other round by round, where it cancels: a :class:`PairedRatio`, its verdict, and the sentences a notebook shows about it, written from that verdict. A
round in which an epoch kept far fewer cores busy than that batch size's best (``throughput.below_peak_cpu``) is
run again while a small budget lasts.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from course_lib.lessons.common.measured import MEASURED_HERE, approx, at_least, in_words
from course_lib.lessons.common.paired_runs import round_order
from course_lib.training import models, pipeline
from course_lib.training.stats import mean_ci95
from course_lib.training.throughput import EpochRate, below_peak_cpu

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure
    import pandas

__all__ = ["PairedRatio", "BatchSweep", "batch_size_sweep", "plot_batch_sweep"]


@dataclass(frozen=True)
class PairedRatio:
    """One variant's images/s over another's, paired round by round, and what it lets a notebook say.

    Attributes:
        larger: The batch size of the numerator.
        smaller: The batch size of the denominator.
        ratio: Mean of the round-by-round ratios.
        ci95: Half-width of its 95 % interval (NaN with one round).
        rounds: Paired rounds.
    """

    larger: int
    smaller: int
    ratio: float
    ci95: float
    rounds: int

    @property
    def verdict(self) -> str:
        """``"True"`` (batch ``larger`` is faster beyond the noise), ``"False"`` (slower) or ``"cannot tell"``."""
        return at_least(self.ratio, self.ci95, 1.0)

    def _measured(self) -> str:
        return (f"{approx(self.ratio)} ± {self.ci95:.2f} times batch {self.smaller}'s images/s, 95 % interval of "
                f"{self.rounds} paired rounds")

    def result_line(self) -> str:
        """The verdict line under the sweep (its ``measured:`` prefix marks a measured statement)."""
        return (f"measured: batch {self.larger} processes more images/s than batch {self.smaller}, beyond the "
                f"noise: {self.verdict} ({self._measured()})")

    def reading(self) -> str:
        """What the result means, in the words its verdict allows (Markdown, two or three sentences)."""
        big, small = f"batch {self.larger}", f"batch {self.smaller}"
        return in_words(
            self.verdict,
            f"{MEASURED_HERE} **On this run one device processed more images per second at {big} than at "
            f"{small}** "
            f"({self._measured()}), as expected when each step has fixed costs that a larger batch pays "
            "fewer times per epoch and gives the cores bigger operations to share (`cpu_per_wall`: the "
            "cores each batch size kept busy). This is why data-parallel training keeps the per-device "
            "batch large enough to fill each device.",
            f"{MEASURED_HERE} **On this run one device processed fewer images per second at {big} than at "
            f"{small}** "
            f"({self._measured()}). The larger batch did not pay here: compare `cpu_per_wall`, "
            "the cores each batch size got. A batch that no longer fits the processor's caches, or "
            "a neighbour that took cores during one batch size's epochs, can do this; run the cell "
            "again to see whether it repeats.",
            f"{MEASURED_HERE} **This run cannot tell {big} from {small}** ({self._measured()}: the interval "
            "contains 1). "
            "Whatever difference there is stays inside this short measurement's noise, so nothing about "
            "the batch size follows from it; `cpu_per_wall` shows how many cores each batch size got. Run "
            "the cell again on a quieter machine.")

    def summary(self) -> str:
        """The summary's bullet about the sweep (Markdown), as decided by the verdict."""
        said = in_words(self.verdict,
                        f"one device processed more images per second at batch {self.larger} than at batch "
                        f"{self.smaller}: a larger batch spreads each step's fixed costs over more images",
                        f"one device processed fewer images per second at batch {self.larger} than at batch "
                        f"{self.smaller}: the larger batch did not pay on this run",
                        f"this run could not tell batch {self.larger} from batch {self.smaller} on one "
                        "device: the difference, if any, stayed inside the noise")
        return f"- {MEASURED_HERE} {said} ({self._measured()})."


@dataclass
class BatchSweep:
    """What :func:`batch_size_sweep` measured.

    Attributes:
        table: One row per batch size: ``batch_size``, ``steps_per_epoch``, ``epochs_timed`` (the
            rounds), ``images_per_sec`` (mean of the timed epochs), ``ci95`` (its half-width; NaN with
            one round), ``step_time_ms`` (batch ÷ ``images_per_sec``: the step time at the mean rate, so the
            two columns agree), ``cpu_per_wall`` (cores kept busy, mean), ``disturbed``
            (timed epochs whose CPU/wall fell below 0.75 × the batch size's best; kept when the
            re-run budget was spent).
        rates: Images/s of every batch size's timed epochs, round by round (index i: round i).
        rerun_rounds: Rounds run again because an epoch in them was disturbed.
    """

    table: "pandas.DataFrame"
    rates: dict[int, list[float]] = field(default_factory=dict)
    rerun_rounds: int = 0

    def compare(self, larger: int, smaller: int) -> PairedRatio:
        """:meth:`ratio` as a :class:`PairedRatio`, with its verdict and words (same arguments and errors)."""
        ratio, ci, rounds = self.ratio(larger, smaller)
        return PairedRatio(larger, smaller, ratio, ci, rounds)

    def ratio(self, larger: int, smaller: int) -> tuple[float, float, int]:
        """Images/s of batch ``larger`` over batch ``smaller``, paired round by round.

        Args:
            larger: A batch size of the sweep (the numerator).
            smaller: Another one (the denominator).

        Returns:
            ``(mean ratio, half-width of its 95 % interval, rounds)``; the half-width is NaN with one round.

        Raises:
            KeyError: A batch size the sweep did not run.
        """
        for batch in (larger, smaller):
            if batch not in self.rates:
                raise KeyError(f"batch size {batch} was not in the sweep ({sorted(self.rates)})")
        paired = [a / b for a, b in zip(self.rates[larger], self.rates[smaller])]
        mean, ci = mean_ci95(paired)
        return mean, ci, len(paired)


class _Trainer:
    """One batch size: a fresh course CNN and its (cached, fixed-order) data set."""

    @staticmethod
    def fresh_session() -> None:
        """Drop the models of earlier runs (Keras' global state)."""
        from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

        keras.backend.clear_session()

    def __init__(self, images: np.ndarray, labels: np.ndarray, batch: int, seed: int) -> None:
        self.batch, self.n = batch, len(images)
        self.model = models.compile_model(models.build_model(seed=seed), "adam")
        self.dataset = pipeline.make_dataset(images, labels, batch_size=batch, training=True, seed=seed)

    def epoch(self) -> EpochRate:
        """Train one epoch; its images/s, step time and CPU/wall."""
        # late: callbacks imports TensorFlow
        from course_lib.training.callbacks import Throughput

        meter = Throughput(self.batch, samples_per_epoch=self.n, warmup_epochs=0, verbose=False)
        self.model.fit(self.dataset, epochs=1, verbose=0, callbacks=[meter])
        return meter.counted_epochs()[-1]


def batch_size_sweep(images: np.ndarray, labels: np.ndarray, batch_sizes: Sequence[int], *,
                     rounds: int = 4, warmup_epochs: int = 1, seed: int = 0, max_rerun_rounds: int = 1,
                     progress: bool = True) -> BatchSweep:
    """Train the course CNN at each batch size, in turn, and measure images per second.

    One model per batch size (the same initial weights). Each first trains ``warmup_epochs`` untimed
    epochs (graph tracing, tf.data's autotuning settling: the second epoch at batch 256 was once a third
    slower on the 2-core VM); then every round trains one epoch of each batch size, in the order of
    :func:`~course_lib.lessons.common.paired_runs.round_order` (reversed every other round), so that load from
    other programs falls on all of
    them alike. A round run again in place of a disturbed one keeps the order of the round it replaces.

    Args:
        images: Training images (N, 28, 28) uint8.
        labels: Their labels.
        batch_sizes: Batch sizes to try, each at most N, no repeats.
        rounds: Timed rounds (one epoch of every batch size each); an even number balances the order.
        warmup_epochs: Untimed epochs of each batch size before the first round.
        seed: Seed of the weights and of the data order.
        max_rerun_rounds: At most this many rounds are run again in place of disturbed ones.
        progress: Print one line as each round starts, so a long sweep is not silent.

    Returns:
        A :class:`BatchSweep`.

    Raises:
        ValueError: A batch size < 1, > N or repeated, ``rounds < 1``, ``warmup_epochs < 0`` or
            ``max_rerun_rounds < 0``.
    """
    import pandas as pd

    n, sizes = len(images), [int(b) for b in batch_sizes]
    bad = [b for b in sizes if not 1 <= b <= n]
    if bad:
        raise ValueError(f"batch sizes must be in 1..{n} (the number of images), got {bad}")
    if len(set(sizes)) != len(sizes) or not sizes:
        raise ValueError(f"batch sizes must be distinct and at least one, got {sizes}")
    for name, value, low in (("rounds", rounds, 1), ("warmup_epochs", warmup_epochs, 0),
                             ("max_rerun_rounds", max_rerun_rounds, 0)):
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    _Trainer.fresh_session()
    trainers = [_Trainer(images, labels, b, seed) for b in sizes]
    if progress:
        print(f"batch sizes {', '.join(map(str, sizes))}: {warmup_epochs} warm-up epoch(s) each, then "
              f"{rounds} rounds of one epoch each, in turn…", flush=True)
    for _ in range(warmup_epochs):
        for trainer in trainers:
            trainer.epoch()

    def one_round(index: int) -> dict[int, EpochRate]:
        return {t.batch: t.epoch() for t in round_order(trainers, index)}

    measured = []
    for index in range(rounds):
        if progress:
            print(f"[{index + 1}/{rounds}] round {index + 1}", flush=True)
        measured.append(one_round(index))
    slow = {b: below_peak_cpu([r[b] for r in measured]) for b in sizes}

    def disturbed(row: dict[int, EpochRate]) -> bool:
        return any(slow[b](row[b]) for b in sizes)

    reruns = 0
    while reruns < max_rerun_rounds and any(disturbed(r) for r in measured):
        reruns += 1
        replaced = next(i for i, r in enumerate(measured) if disturbed(r))
        fresh = one_round(replaced)              # the order of the round it would replace
        if not disturbed(fresh):
            measured[replaced] = fresh
    rows = []
    for b in sizes:
        epochs = [r[b] for r in measured]
        mean, ci = mean_ci95([e.images_per_sec for e in epochs])
        rows.append({"batch_size": b, "steps_per_epoch": pipeline.steps_per_epoch(n, b),
                     "epochs_timed": len(epochs), "images_per_sec": mean, "ci95": ci,
                     # batch / images_per_sec, the step at the mean rate: the table's columns agree exactly (the
                     # mean of the epochs' own step times is longer, by Jensen's inequality: issue 52)
                     "step_time_ms": 1000.0 * b / mean,
                     "cpu_per_wall": math.fsum(e.cpu_per_wall for e in epochs) / len(epochs),
                     "disturbed": sum(slow[b](e) for e in epochs)})
    return BatchSweep(pd.DataFrame(rows), {b: [r[b].images_per_sec for r in measured] for b in sizes}, reruns)


def plot_batch_sweep(sweep: "BatchSweep | pandas.DataFrame", *, title: str = "") -> "matplotlib.figure.Figure":
    """Images/s against batch size (log scale) and, for a sweep, each batch size over the smallest, paired.

    The left panel draws each batch size's mean images/s with its own 95 % interval (epoch to epoch, which
    includes what moved the whole machine). Given a :class:`BatchSweep`, a right panel draws the ratio that
    the verdict uses: each batch size's images/s over the smallest batch size's, round by round, with its
    paired 95 % interval and the line "no gain" at 1.

    Args:
        sweep: The result of :func:`batch_size_sweep`, or its ``table`` (then the left panel only).
        title: Figure title.

    Returns:
        The figure; show it with :func:`course_lib.lessons.common.display.show_figure`.
    """
    from matplotlib.figure import Figure

    table = sweep.table if isinstance(sweep, BatchSweep) else sweep
    paired = isinstance(sweep, BatchSweep) and len(sweep.rates) > 1
    fig = Figure(figsize=(10, 3.5) if paired else (6, 3.5), layout="constrained")
    axes = fig.subplots(1, 2) if paired else [fig.add_subplot()]
    ax = axes[0]
    errors = table["ci95"].fillna(0.0)
    ax.errorbar(table["batch_size"], table["images_per_sec"], yerr=errors, marker="o", capsize=3,
                label="mean (95 % interval, epoch to epoch)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(table["batch_size"]), [str(b) for b in table["batch_size"]])
    ax.set_xlabel("batch size (one device)")
    ax.set_ylabel("training images / s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    if paired:
        assert isinstance(sweep, BatchSweep)
        smallest = min(sweep.rates)
        others = sorted(b for b in sweep.rates if b != smallest)
        compared = [sweep.compare(b, smallest) for b in others]
        right = axes[1]
        right.axhline(1.0, linestyle="--", color="grey", label="no gain")
        right.errorbar(others, [c.ratio for c in compared],
                       yerr=[0.0 if math.isnan(c.ci95) else c.ci95 for c in compared], marker="o", capsize=3,
                       color="tab:green", label="paired 95 % interval (the verdict's)")
        right.set_xscale("log", base=2)
        right.set_xticks(others, [str(b) for b in others])
        right.set_xlabel("batch size (one device)")
        right.set_ylabel(f"images/s ÷ batch {smallest}'s, per round")
        right.set_ylim(bottom=0)
        right.grid(True, alpha=0.3)
        right.legend(loc="lower right", fontsize=8)
    fig.suptitle(title or "Throughput vs batch size")
    return fig
