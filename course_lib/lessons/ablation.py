"""Large-batch ablation: configurations that change one thing each, several seeds, verdicts with CIs.

A ladder of :class:`Config` rows, each naming the row it builds on; :func:`changes` derives the
"changes" column from the settings, so it cannot disagree with what ran. Each row runs with the same
seeds (same initial weights, data order, dropout masks), so two rows compare *paired*: the verdicts
use the 95 % CI of the per-seed differences (:func:`course_lib.training.stats.mean_ci95`) and say
"cannot tell" when it straddles the threshold. Nothing here imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from course_lib.training.stats import CANNOT_TELL, ci_verdict, interval_verdict, mean_ci95

__all__ = ["Config", "changes", "updates_to_target", "target_from_baseline", "paired_difference",
           "decide", "images_ratio", "paired_speed_ratio", "time_to_target_winner", "explain", "seed_table",
           "ladder_table", "plot_curves"]


@dataclass(frozen=True)
class Config:
    """One configuration of the ablation (a row of the ladder).

    Attributes:
        name: Row label, e.g. ``"+ warm-up"``.
        flags: Script flags, ``{"--lr": "0.001", "--scale-lr": True}`` (``True`` is a switch,
            ``False`` or ``None`` leaves the flag out), or the settings of an in-process run
            (:mod:`course_lib.lessons.trials`).
        parent: Name of the row it builds on (``None`` for the baseline).
        workers: Horovod processes for the run.
    """

    name: str
    flags: Mapping[str, Any] = field(default_factory=dict)
    parent: str | None = None
    workers: int = 1

    def args(self) -> list[str]:
        """The flags as a script argument list (``True`` switches give just the flag)."""
        return [part for flag, value in _pairs(self) for part in (flag, value) if part != ""]


def changes(configs: Sequence[Config]) -> dict[str, list[str]]:
    """What each configuration changes relative to its parent, from the flags themselves.

    Args:
        configs: The ladder, parents before children.

    Returns:
        ``{name: ["--lr 0.001 -> 0.008", "+--scale-lr", "---plateau", ...]}`` (``["baseline"]``
        without parent).

    Raises:
        ValueError: Duplicate names, or a parent that is not an earlier configuration.
    """
    table: dict[str, Config] = {}
    result: dict[str, list[str]] = {}
    for config in configs:
        if config.name in table:
            raise ValueError(f"two configurations are named {config.name!r}; names must be unique")
        if config.parent is not None and config.parent not in table:
            raise ValueError(f"{config.name!r} builds on {config.parent!r}, which is not an "
                             "earlier configuration; list the parent first")
        table[config.name] = config
        if config.parent is None:
            result[config.name] = ["baseline"]
            continue
        parent = table[config.parent]
        old, new = dict(_pairs(parent)), dict(_pairs(config))
        diff = [f"-{f}" if f not in new else f"{f} {old[f]} -> {new[f]}"
                for f in old if old[f] != new.get(f)]
        diff += [f"+{f} {v}".rstrip() for f, v in new.items() if f not in old]
        if parent.workers != config.workers:
            diff.append(f"workers {parent.workers} -> {config.workers}")
        result[config.name] = diff
    return result


def _pairs(config: Config) -> list[tuple[str, str]]:
    return [(flag, "" if value is True else str(value)) for flag, value in config.flags.items()
            if value is not None and value is not False]


def updates_to_target(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """Updates done when the validation accuracy first reached ``target`` (``None``: never).

    Args:
        curve: ``[(updates, accuracy), ...]`` in order (one point per validation check).
        target: Accuracy in 0..1, fixed before the runs.

    Raises:
        ValueError: ``target`` outside 0..1.
    """
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"target must be an accuracy in 0..1, got {target}")
    return next((int(updates) for updates, accuracy in curve if accuracy >= target), None)


def target_from_baseline(baseline: Sequence[Mapping[str, Any]], fraction: float) -> float:
    """The accuracy target of updates-to-target: ``fraction`` × the baseline's mean final VALIDATION
    accuracy (a rule fixed before the runs; the test set is not read).

    Args:
        baseline: The baseline row's trials (each with ``val_accuracy``).
        fraction: In (0, 1], e.g. 0.9.

    Raises:
        ValueError: ``fraction`` outside (0, 1], or no trials.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if not baseline:
        raise ValueError("the baseline has no trials")
    return fraction * sum(float(t["val_accuracy"]) for t in baseline) / len(baseline)


def paired_difference(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]],
                      key: str = "test_accuracy") -> tuple[float, float]:
    """Mean of ``a[key] - b[key]`` over the seeds both ran, and its 95 % CI half-width.

    Raises:
        ValueError: Fewer than 2 common seeds (no interval).
    """
    by_seed = {t["seed"]: t[key] for t in b}
    diffs = [float(t[key]) - float(by_seed[t["seed"]]) for t in a if t["seed"] in by_seed]
    if len(diffs) < 2:
        raise ValueError("a paired comparison needs at least 2 seeds run by both rows")
    return mean_ci95(diffs)


def decide(mean: float, half: float, threshold: float = 0.0) -> str:
    """``"above"`` when the CI ``mean ± half`` lies above ``threshold``, ``"below"`` when below,
    ``"cannot tell"`` when it contains it (:func:`course_lib.training.stats.ci_verdict` in words)."""
    return {True: "above", False: "below", None: CANNOT_TELL}[ci_verdict(mean, half, threshold)]


def images_ratio(large: Sequence[Mapping[str, Any]], small: Sequence[Mapping[str, Any]], large_batch: int,
                 small_batch: int, target: float) -> tuple[float, float] | None:
    """Images the large batch needs to reach ``target`` over those the small batch needs, seed by seed.

    Returns:
        Mean ± 95 % CI half-width of the per-seed ratio (NaN half-width for one seed), or ``None`` when
        a run of either row never reached the target.
    """
    by_seed = {t["seed"]: updates_to_target(t["val_curve"], target) for t in small}
    ratios = []
    for trial in large:
        if trial["seed"] not in by_seed:
            continue
        reach_large, reach_small = updates_to_target(trial["val_curve"], target), by_seed[trial["seed"]]
        if reach_large is None or reach_small is None:
            return None
        ratios.append(reach_large * large_batch / (reach_small * small_batch))
    if not ratios:
        raise ValueError("the two rows have no seed in common")
    return mean_ci95(ratios)


def paired_speed_ratio(ladders: Sequence[tuple[Sequence[Mapping[str, Any]], Sequence[Sequence[Mapping[str, Any]]]]],
                       images_per_epoch: int) -> tuple[float, float]:
    """How many times the images/s of the small batch the large batch runs, paired round by round.

    A round is one seed's runs of one ladder, made one after the other (in alternating order from round to
    round, so that a drift of the machine slows both batches alike). The ratio is taken within each round (the
    large-batch runs' mean images/s over the small-batch run's) and averaged over the rounds of every ladder.

    Args:
        ladders: Per ladder, ``(small-batch trials, [large-batch trials of each large row])``; each trial has
            ``seed`` and ``epoch_s`` (training seconds per epoch).
        images_per_epoch: Training images of one epoch.

    Returns:
        Mean ratio and its 95 % CI half-width over the rounds.

    Raises:
        ValueError: No round (no seed run by the small row and every large row of a ladder).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    def rate(trial: Mapping[str, Any]) -> float:
        return images_per_epoch * len(trial["epoch_s"]) / math.fsum(trial["epoch_s"])

    ratios = []
    for small, large in ladders:
        by_seed = [{t["seed"]: rate(t) for t in row} for row in large]
        ratios += [sum(row[t["seed"]] for row in by_seed) / len(by_seed) / rate(t) for t in small
                   if all(t["seed"] in row for row in by_seed)]
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
    """
    if images is None:
        return "small batch"
    (ratio, ratio_half), (rate, rate_half) = images, speed
    ratio_half, rate_half = (0.0 if math.isnan(h) else h for h in (ratio_half, rate_half))
    first = interval_verdict(ratio - ratio_half - (rate + rate_half), ratio + ratio_half - (rate - rate_half),
                             0.0)
    return {True: "small batch", False: "large batch", None: CANNOT_TELL}[first]


def explain(verdict: str, mechanism: str) -> str:
    """The reason a summary gives for a rung: its mechanism when the rung measured ``"better"``, and only
    the proposal, marked as not shown, when it did not."""
    if verdict == "better":
        return mechanism
    return f"proposed: {mechanism}; not shown here ({verdict})"


def seed_table(configs: Sequence[Config], runs: Mapping[str, Sequence[Mapping[str, Any]]],
               target: float | Mapping[str, float]) -> Any:
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
    """
    import pandas as pd

    diff, rows = changes(configs), []
    for config in configs:
        trials = runs.get(config.name) or []
        if not trials:
            raise ValueError(f"no trials for configuration {config.name!r}")
        mean, half = mean_ci95([t["test_accuracy"] for t in trials])
        goal = target if isinstance(target, (int, float)) else target[config.name]
        reach = [updates_to_target(t["val_curve"], goal) for t in trials]
        rows.append({"config": config.name, "changes": ", ".join(diff[config.name]),
                     "batch": config.flags.get("batch"), "lr": trials[0]["lr"],
                     "updates": trials[0]["updates"], "seeds": len(trials),
                     "test_accuracy": mean, "ci95": half,
                     "val_accuracy": mean_ci95([t["val_accuracy"] for t in trials])[0],
                     "updates_to_target": ("not reached" if None in reach
                                           else int(np.median([r for r in reach if r is not None])))})
    return pd.DataFrame(rows).set_index("config")


def ladder_table(configs: Sequence[Config], runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> Any:
    """Each row against its parent: paired test-accuracy difference, its CI and a verdict.

    Returns:
        A DataFrame indexed by name (the baseline has no row): ``parent``, ``delta``, ``ci95``,
        ``verdict`` (``"better"``, ``"worse"``, ``"cannot tell"``).
    """
    import pandas as pd

    words = {True: "better", False: "worse", None: CANNOT_TELL}
    rows = []
    for config in configs:
        if config.parent is not None:
            mean, half = paired_difference(runs[config.name], runs[config.parent])
            rows.append({"config": config.name, "parent": config.parent, "delta": mean,
                         "ci95": half, "verdict": words[ci_verdict(mean, half, 0.0)]})
    return pd.DataFrame(rows).set_index("config")


def plot_curves(configs: Sequence[Config], runs: Mapping[str, Sequence[Mapping[str, Any]]],
                images_per_epoch: int, target: float | None = None, title: str = "") -> Any:
    """Mean validation accuracy against images seen (left) and test accuracy ± 95 % CI (right).

    Returns:
        The matplotlib Figure (closed: show it with ``display``).
    """
    import matplotlib.pyplot as plt

    fig, (curve_ax, bar_ax) = plt.subplots(1, 2, figsize=(13, 4.2))
    names = [c.name for c in configs]
    for name in names:
        curves = [t["val_curve"] for t in runs[name]]
        means = [sum(c[i][1] for c in curves) / len(curves) for i in range(len(curves[0]))]
        first = runs[name][0]   # images seen at a check: its updates x the images of one update
        per_update = images_per_epoch * first.get("epochs", len(curves[0])) / first["updates"]
        seen = [updates * per_update for updates, _ in curves[0]]
        curve_ax.plot(seen, means, marker="o", label=name)
    if target is not None:
        curve_ax.axhline(target, color="grey", linestyle="--", label=f"target {target:.2f}")
    curve_ax.set(xlabel="training images seen (equal budget)", ylabel="validation accuracy (mean)")
    curve_ax.legend(fontsize=7)
    stats = [mean_ci95([t["test_accuracy"] for t in runs[n]]) for n in names]
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
