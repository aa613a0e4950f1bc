"""Live single-device experiments shown in the notebooks.

:func:`batch_size_sweep` measures the course CNN's training throughput at several batch sizes on
one device (a bigger batch gives the hardware more work per step, up to a point), with the
course's :class:`~course_lib.training.callbacks.Throughput` callback, so the figures count only the images
that really ran and leave the first (tracing) epoch out. An epoch that kept far fewer cores busy than the
run's best epoch (:func:`course_lib.training.throughput.below_peak_cpu`) is run again
(:func:`course_lib.training.throughput.remeasure_disturbed`), so one bad second of the machine does
not decide the lesson's verdict.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

from course_lib.training import models, pipeline
from course_lib.training.stats import mean_ci95
from course_lib.training.throughput import below_peak_cpu, remeasure_disturbed

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure
    import pandas

__all__ = ["batch_size_sweep", "plot_batch_sweep"]


def batch_size_sweep(images: np.ndarray, labels: np.ndarray, batch_sizes: Sequence[int], *,
                     epochs: int = 3, warmup_epochs: int = 1, seed: int = 0,
                     progress: bool = True) -> "pandas.DataFrame":
    """Train the course CNN at each batch size and measure images per second.

    Args:
        images: Training images (N, 28, 28) uint8.
        labels: Their labels.
        batch_sizes: Batch sizes to try, each at most N.
        epochs: Epochs per batch size, warm-up included; at least ``warmup_epochs + 1``.
        warmup_epochs: The first epochs are not timed: graph tracing, and tf.data's autotuning
            still settling (the second epoch at batch 256 was once a third slower on the 2-core VM).
        seed: Seed of the weights and of the data order.
        progress: Print one line as each batch size starts, so a long sweep is not silent.

    Returns:
        A DataFrame with columns ``batch_size``, ``steps_per_epoch``, ``epochs_timed``
        (``epochs - warmup_epochs``), ``images_per_sec`` (mean of the timed epochs), ``ci95`` (half-width; NaN with one timed epoch),
        ``step_time_ms``, ``cpu_per_wall`` (cores kept busy, mean of the timed epochs),
        ``remeasured`` (extra epochs run in place of disturbed ones: CPU/wall below 0.75 × the
        run's best; at most half the timed epochs, at least one) and ``disturbed_kept``
        (disturbed epochs left in because that budget ran out).

    Raises:
        ValueError: If a batch size is < 1 or > N, ``warmup_epochs < 0`` or no epoch is left to time.
    """
    import pandas as pd

    n = len(images)
    bad = [b for b in batch_sizes if not 1 <= int(b) <= n]
    if bad:
        raise ValueError(f"batch sizes must be in 1..{n} (the number of images), got {bad}")
    if warmup_epochs < 0:
        raise ValueError(f"warmup_epochs must be >= 0, got {warmup_epochs}")
    if epochs <= warmup_epochs:
        raise ValueError(f"epochs must be > warmup_epochs ({warmup_epochs}) so that one epoch is timed, "
                         f"got epochs={epochs}")
    rows = []
    for index, batch in enumerate(batch_sizes, start=1):
        if progress:
            print(f"[{index}/{len(batch_sizes)}] batch size {int(batch)}: training {epochs} epochs…",
                  flush=True)
        rows.append(_measure_batch(images, labels, int(batch), epochs, warmup_epochs, seed))
    return pd.DataFrame(rows)


def _measure_batch(images: np.ndarray, labels: np.ndarray, batch: int, epochs: int,
                   warmup_epochs: int, seed: int) -> dict[str, float]:
    """One row of :func:`batch_size_sweep`: a fresh model, ``epochs`` epochs, disturbed ones re-run."""
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    # late: callbacks imports TensorFlow
    from course_lib.training.callbacks import Throughput

    n = len(images)
    keras.backend.clear_session()
    model = models.compile_model(models.build_model(seed=seed), "adam")
    dataset = pipeline.make_dataset(images, labels, batch_size=batch, training=True, seed=seed)

    def one_more_epoch() -> Throughput:
        meter = Throughput(batch, samples_per_epoch=n, warmup_epochs=0, verbose=False)
        model.fit(dataset, epochs=1, verbose=0, callbacks=[meter])
        return meter

    first = Throughput(batch, samples_per_epoch=n, warmup_epochs=warmup_epochs, verbose=False)
    model.fit(dataset, epochs=epochs, verbose=0, callbacks=[first])
    slow = below_peak_cpu(first.counted_epochs())
    timed, extra = remeasure_disturbed(first, one_more_epoch, disturbed=slow,
                                       max_extra=max(1, (epochs - warmup_epochs) // 2))
    mean, ci = mean_ci95([e.images_per_sec for e in timed])
    return {"batch_size": batch, "steps_per_epoch": pipeline.steps_per_epoch(n, batch),
            "epochs_timed": len(timed), "images_per_sec": mean, "ci95": ci,
            "step_time_ms": math.fsum(e.step_time_ms for e in timed) / len(timed),
            "cpu_per_wall": math.fsum(e.cpu_per_wall for e in timed) / len(timed),
            "remeasured": extra, "disturbed_kept": sum(slow(e) for e in timed)}


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
