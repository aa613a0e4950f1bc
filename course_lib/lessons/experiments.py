"""Live single-device experiments shown in the notebooks.

:func:`batch_size_sweep` measures the course CNN's training throughput at several batch sizes on
one device (a bigger batch gives the hardware more work per step, up to a point), with the
course's :class:`~course_lib.training.callbacks.Throughput` callback, so the figures count only the images
that really ran and leave the first (tracing) epoch out.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure
    import pandas

__all__ = ["batch_size_sweep", "plot_batch_sweep"]


def batch_size_sweep(images: np.ndarray, labels: np.ndarray, batch_sizes: Sequence[int], *,
                     epochs: int = 3, seed: int = 0, progress: bool = True) -> "pandas.DataFrame":
    """Train the course CNN at each batch size and measure images per second.

    Args:
        images: Training images (N, 28, 28) uint8.
        labels: Their labels.
        batch_sizes: Batch sizes to try, each at most N.
        epochs: Epochs per batch size; the first is warm-up and not counted, so at least 2.
        seed: Seed of the weights and of the data order.
        progress: Print one line as each batch size starts, so a long sweep is not silent.

    Returns:
        A DataFrame with columns ``batch_size``, ``steps_per_epoch``, ``images_per_sec`` (mean of
        the counted epochs), ``ci95`` (half-width; NaN with a single counted epoch) and
        ``step_time_ms``.

    Raises:
        ValueError: If a batch size is < 1 or > N, or ``epochs < 2``.
    """
    import pandas as pd
    import tensorflow as tf

    from course_lib.training import models, pipeline
    from course_lib.training.callbacks import Throughput

    n = len(images)
    bad = [b for b in batch_sizes if not 1 <= int(b) <= n]
    if bad:
        raise ValueError(f"batch sizes must be in 1..{n} (the number of images), got {bad}")
    if epochs < 2:
        raise ValueError(f"epochs must be >= 2 (the first is warm-up), got {epochs}")
    rows = []
    for index, batch in enumerate(batch_sizes, start=1):
        if progress:
            print(f"[{index}/{len(batch_sizes)}] batch size {int(batch)}: training {epochs} epochs…",
                  flush=True)
        tf.keras.backend.clear_session()
        model = models.compile_model(models.build_model(seed=seed), "adam")
        dataset = pipeline.make_dataset(images, labels, batch_size=int(batch), training=True, seed=seed)
        meter = Throughput(int(batch), samples_per_epoch=n, warmup_epochs=1, verbose=False)
        model.fit(dataset, epochs=epochs, verbose=0, callbacks=[meter])
        summary = meter.summary()
        rows.append({"batch_size": int(batch), "steps_per_epoch": pipeline.steps_per_epoch(n, int(batch)),
                     "images_per_sec": summary.images_per_sec_mean, "ci95": summary.ci95,
                     "step_time_ms": summary.step_time_ms_mean})
    return pd.DataFrame(rows)


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
