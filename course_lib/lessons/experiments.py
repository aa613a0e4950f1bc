"""Live single-device experiments shown in the notebooks.

:func:`batch_size_sweep` measures the course CNN's training throughput at several batch sizes on
one device (a bigger batch gives the hardware more work per step, up to a point), with the
course's :class:`~course_lib.training.callbacks.Throughput` callback, so the figures count only the images
that really ran and leave the warm-up (tracing) epochs out. The batch sizes train **in turn, one epoch
each per round** (the order rotates), so a slowdown of the machine moves all of them, and
:meth:`BatchSweep.ratio` compares two batch sizes round by round, where that slowdown cancels. A round in
which an epoch kept far fewer cores busy than that batch size's best epoch
(:func:`course_lib.training.throughput.below_peak_cpu`) is run again, all batch sizes together, while a
small budget lasts.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from course_lib.training import models, pipeline
from course_lib.training.stats import mean_ci95
from course_lib.training.throughput import EpochRate, below_peak_cpu

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure
    import pandas

__all__ = ["BatchSweep", "batch_size_sweep", "plot_batch_sweep"]


@dataclass
class BatchSweep:
    """What :func:`batch_size_sweep` measured.

    Attributes:
        table: One row per batch size: ``batch_size``, ``steps_per_epoch``, ``epochs_timed`` (the
            rounds), ``images_per_sec`` (mean of the timed epochs), ``ci95`` (its half-width; NaN with
            one round), ``step_time_ms``, ``cpu_per_wall`` (cores kept busy, mean), ``disturbed``
            (timed epochs whose CPU/wall fell below 0.75 × the batch size's best; kept when the
            re-run budget was spent).
        rates: Images/s of every batch size's timed epochs, round by round (index i: round i).
        rerun_rounds: Rounds run again because an epoch in them was disturbed.
    """

    table: "pandas.DataFrame"
    rates: dict[int, list[float]] = field(default_factory=dict)
    rerun_rounds: int = 0

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
                     rounds: int = 3, warmup_epochs: int = 1, seed: int = 0, max_rerun_rounds: int = 1,
                     progress: bool = True) -> BatchSweep:
    """Train the course CNN at each batch size, in turn, and measure images per second.

    One model per batch size (the same initial weights). Each first trains ``warmup_epochs`` untimed
    epochs (graph tracing, tf.data's autotuning settling: the second epoch at batch 256 was once a third
    slower on the 2-core VM); then every round trains one epoch of each batch size, the order rotating
    from round to round, so that load from other programs falls on all of them alike.

    Args:
        images: Training images (N, 28, 28) uint8.
        labels: Their labels.
        batch_sizes: Batch sizes to try, each at most N, no repeats.
        rounds: Timed rounds (one epoch of every batch size each).
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
        turn = index % len(trainers)
        return {t.batch: t.epoch() for t in trainers[turn:] + trainers[:turn]}

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
        fresh = one_round(rounds + reruns - 1)
        if not disturbed(fresh):
            measured[next(i for i, r in enumerate(measured) if disturbed(r))] = fresh
    rows = []
    for b in sizes:
        epochs = [r[b] for r in measured]
        mean, ci = mean_ci95([e.images_per_sec for e in epochs])
        rows.append({"batch_size": b, "steps_per_epoch": pipeline.steps_per_epoch(n, b),
                     "epochs_timed": len(epochs), "images_per_sec": mean, "ci95": ci,
                     "step_time_ms": math.fsum(e.step_time_ms for e in epochs) / len(epochs),
                     "cpu_per_wall": math.fsum(e.cpu_per_wall for e in epochs) / len(epochs),
                     "disturbed": sum(slow[b](e) for e in epochs)})
    return BatchSweep(pd.DataFrame(rows), {b: [r[b].images_per_sec for r in measured] for b in sizes}, reruns)


def plot_batch_sweep(table: "pandas.DataFrame", *, title: str = "") -> "matplotlib.figure.Figure":
    """Images/s against batch size (log scale), with the 95 % interval as error bars.

    Args:
        table: The result of :func:`batch_size_sweep`.
        title: Figure title.

    Returns:
        The figure; show it with :func:`course_lib.lessons.display.show_figure`.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5))
    ax = fig.add_subplot()
    errors = table["ci95"].fillna(0.0)
    ax.errorbar(table["batch_size"], table["images_per_sec"], yerr=errors, marker="o", capsize=3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (one device)")
    ax.set_ylabel("training images / s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "Throughput vs batch size")
    fig.tight_layout()
    return fig
