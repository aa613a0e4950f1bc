"""What notebook 04 shows of a ladder's runs: one table row per configuration, and its curves.

:func:`seed_table` puts each configuration's change, update count and test accuracy (mean ± 95 % CI over the
seeds) side by side; :func:`plot_curves` draws the mean validation accuracy against the images seen and the
test accuracies with their intervals. Nothing here imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from course_lib.lessons.large_batch.ladder import Config, changes
from course_lib.lessons.large_batch.time_to_target import updates_to_target
from course_lib.lessons.large_batch.trials import Trial
from course_lib.training.stats import mean_ci95

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure
    import pandas

__all__ = ["seed_table", "plot_curves"]


def seed_table(configs: Sequence[Config], runs: Mapping[str, Sequence[Trial]],
               target: float | Mapping[str, float]) -> "pandas.DataFrame":
    """One row per configuration: what changed, updates, test accuracy mean ± 95 % CI over seeds.

    Args:
        configs: The ladder (its order is the table's).
        runs: ``{name: [trial per seed]}``.
        target: Validation accuracy of ``updates_to_target`` (median over seeds; "not reached" when a
            seed never reached it), one for all rows or ``{name: target}`` per row.

    Returns:
        A DataFrame indexed by name.

    Raises:
        ValueError: A configuration without trials.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    import pandas as pd

    diff, rows = changes(configs), []
    for config in configs:
        trials = runs.get(config.name) or []
        if not trials:
            raise ValueError(f"no trials for configuration {config.name!r}")
        mean, half = mean_ci95([t.accuracy() for t in trials])
        goal = target if isinstance(target, (int, float)) else target[config.name]
        reach = [updates_to_target(t.val_curve, goal) for t in trials]
        rows.append({"config": config.name, "changes": ", ".join(diff[config.name]),
                     "batch": config.flags.get("batch"), "lr": trials[0].lr,
                     "updates": trials[0].updates, "seeds": len(trials),
                     "test_accuracy": mean, "ci95": half,
                     "val_accuracy": mean_ci95([t.val_accuracy for t in trials])[0],
                     "updates_to_target": ("not reached" if None in reach
                                           else int(np.median([r for r in reach if r is not None])))})
    return pd.DataFrame(rows).set_index("config")


def plot_curves(configs: Sequence[Config], runs: Mapping[str, Sequence[Trial]], images_per_epoch: int,
                target: float | None = None, title: str = "") -> "matplotlib.figure.Figure":
    """Mean validation accuracy against images seen (left) and test accuracy ± 95 % CI (right).

    Returns:
        The matplotlib Figure (closed: show it with ``display``).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    import matplotlib.pyplot as plt

    fig, (curve_ax, bar_ax) = plt.subplots(1, 2, figsize=(13, 4.2))
    names = [c.name for c in configs]
    for name in names:
        curves = [t.val_curve for t in runs[name]]
        means = [sum(c[i][1] for c in curves) / len(curves) for i in range(len(curves[0]))]
        first = runs[name][0]   # images seen at a check: its updates x the images of one update
        per_update = images_per_epoch * first.epochs / first.updates
        seen = [updates * per_update for updates, _ in curves[0]]
        curve_ax.plot(seen, means, marker="o", label=name)
    if target is not None:
        curve_ax.axhline(target, color="grey", linestyle="--", label=f"target {target:.2f}")
    curve_ax.set(xlabel="training images seen (equal budget)", ylabel="validation accuracy (mean)")
    curve_ax.legend(fontsize=7)
    stats = [mean_ci95([t.accuracy() for t in runs[n]]) for n in names]
    bar_ax.errorbar([m for m, _ in stats], range(len(names)), xerr=[h for _, h in stats], fmt="o",
                    capsize=4)
    bar_ax.set_yticks(range(len(names)), names)
    bar_ax.invert_yaxis()
    bar_ax.set(xlabel="test accuracy, mean ± 95 % CI over seeds")
    for ax in (curve_ax, bar_ax):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig

