"""Large-batch ablation: configurations that change one thing each, tables, time-to-accuracy.

A ladder of :class:`Config` rows, each naming the row it builds on; :func:`changes` derives the
"changes" column from the flags, so it cannot disagree with what ran. The runs' ``epoch`` events
(``--eval-every-epoch`` adds test metrics) become tables, time-to-accuracy, a plot and a verdict,
at equal sample budget (same epochs = same images; the optimizer updates differ and are shown).
Nothing here imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["Config", "changes", "emulation", "time_to_accuracy",
           "epoch_table", "summary_table", "verdict", "plot_curves"]


@dataclass(frozen=True)
class Config:
    """One configuration of the ablation (a row of the ladder).

    Attributes:
        name: Row label, e.g. ``"+ warm-up"``.
        flags: Script flags, ``{"--lr": "0.001", "--scale-lr": True}``; ``True`` is a switch,
            ``False`` or ``None`` leaves the flag out.
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


def emulation(workers: int, backward_passes_per_step: int) -> str:
    """How a run makes its global batch: ``"none"``, ``"2 workers"``, ``"accumulation x8"``..."""
    parts = [f"{workers} workers"] if workers > 1 else []
    if backward_passes_per_step > 1:
        parts.append(f"accumulation x{backward_passes_per_step}")
    return " + ".join(parts) or "none"


def _cumulative(epochs: Sequence[Mapping[str, Any]], k: int) -> list[dict[str, Any]]:
    """Per epoch: samples, steps, updates = floor(steps / k) and training seconds so far.

    Horovod's accumulation increments ``optimizer.iterations`` at every step, so real updates
    are counted from the steps (a partial accumulation carries into the next epoch).
    """
    rows, samples, steps, train_time = [], 0, 0, 0.0
    for event in epochs:
        samples += int(event["samples"])
        steps += int(event["steps"])
        train_time += float(event["epoch_time_s"])
        rows.append({"epoch": int(event["epoch"]), "samples": samples, "steps": steps,
                     "updates": steps // k, "train_time_s": train_time,
                     "test_accuracy": event.get("test_accuracy"),
                     "test_loss": event.get("test_loss"), "wall_time_s": event.get("wall_time_s")})
    return rows


def time_to_accuracy(epochs: Sequence[Mapping[str, Any]], target: float,
                     backward_passes_per_step: int = 1) -> dict[str, Any]:
    """First epoch whose test accuracy reaches ``target``, and what it cost to get there.

    Args:
        epochs: The run's ``epoch`` events in order, each with ``steps``, ``samples``,
            ``epoch_time_s``, ``test_accuracy`` (and optionally ``wall_time_s``).
        target: Test accuracy to reach (fixed before the runs), in 0..1.
        backward_passes_per_step: k, the batches accumulated per optimizer update.

    Returns:
        ``{"reached": bool, "epoch", "samples", "steps", "updates", "train_time_s",
        "wall_time_s"}``; all but ``reached`` are ``None`` when the target was not reached.

    Raises:
        ValueError: ``target`` outside 0..1, or an event without ``test_accuracy`` (run the
            script with ``--eval-every-epoch``).
    """
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"target must be an accuracy in 0..1, got {target}")
    for row in _cumulative(epochs, backward_passes_per_step):
        if row["test_accuracy"] is None:
            raise ValueError(f"epoch {row['epoch']} has no test_accuracy; run the script "
                             "with --eval-every-epoch")
        if float(row["test_accuracy"]) >= target:
            return {"reached": True, **{k: v for k, v in row.items() if not k.startswith("test")}}
    return {"reached": False, **dict.fromkeys(
        ("epoch", "samples", "steps", "updates", "train_time_s", "wall_time_s"))}


def _parts(run: Any) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """``(config event, epoch events)`` of a RunResult or of a ``{"config", "epochs"}`` dict."""
    config, epochs = (run["config"], run["epochs"]) if isinstance(run, Mapping) else (
        run.config, run.epochs)
    if not config:
        raise ValueError("a run has no 'config' event; run the script with --json")
    return config, list(epochs)


def epoch_table(runs: Mapping[str, Any]) -> "Any":
    """One row per (configuration, epoch): cumulative samples/steps/updates, test metrics.

    Args:
        runs: ``{name: RunResult or {"config": ..., "epochs": [...]}}``.

    Returns:
        A pandas DataFrame with ``config``, ``epoch``, ``samples``, ``steps``, ``updates``,
        ``train_time_s``, ``test_accuracy``, ``test_loss``, ``wall_time_s``.
    """
    import pandas as pd

    rows = [{"config": name, **row} for name, run in runs.items() for row in _cumulative(
        _parts(run)[1], int(_parts(run)[0].get("backward_passes_per_step", 1)))]
    return pd.DataFrame(rows)


def summary_table(configs: Sequence[Config], runs: Mapping[str, Any], target: float) -> "Any":
    """One row per configuration: what changed, how the batch was made, final metrics, cost.

    Args:
        configs: The ladder (its order is the table's order).
        runs: ``{name: RunResult or {"config": ..., "epochs": [...]}}``, one per configuration.
        target: Test accuracy of the time-to-accuracy columns.

    Returns:
        A DataFrame indexed by name; ``*_to_target`` columns say ``"not reached"`` when the run
        never got there (``train_s``: training epochs only; ``wall_s``: since the script started).

    Raises:
        ValueError: A configuration without run, or a run without epochs / test accuracy.
    """
    import pandas as pd

    diff = changes(configs)
    rows = []
    for config in configs:
        if config.name not in runs:
            raise ValueError(f"no run for configuration {config.name!r}")
        event, epochs = _parts(runs[config.name])
        if not epochs:
            raise ValueError(f"the run of {config.name!r} printed no epoch events")
        k = int(event.get("backward_passes_per_step", 1))
        reach = time_to_accuracy(epochs, target, k)
        last, total = epochs[-1], _cumulative(epochs, k)[-1]
        missing = "not reached"
        rows.append({
            "config": config.name, "changes": ", ".join(diff[config.name]),
            "emulation": emulation(int(event["workers"]), k),
            "global_batch": int(event["global_batch"]), "optimizer": event.get("optimizer"),
            "lr": float(event["lr"]), "epochs": len(epochs), "samples": total["samples"],
            "steps": total["steps"], "updates": total["updates"],
            "test_accuracy": float(last["test_accuracy"]), "test_loss": float(last["test_loss"]),
            "epoch_to_target": reach["epoch"] if reach["reached"] else missing,
            "updates_to_target": reach["updates"] if reach["reached"] else missing,
            "train_s_to_target": (round(reach["train_time_s"], 1) if reach["reached"]
                                  else missing),
            "wall_s_to_target": (missing if not reach["reached"] else "n/a"
                                 if reach["wall_time_s"] is None else round(reach["wall_time_s"], 1)),
        })
    return pd.DataFrame(rows).set_index("config")


def verdict(summary: Any, baseline: str, candidates: Sequence[str],
            tolerance: float = 0.01) -> dict[str, Any]:
    """Which candidate ends closest to the baseline's test accuracy, and is it within tolerance.

    Args:
        summary: :func:`summary_table`'s DataFrame.
        baseline: Name of the small-batch row.
        candidates: Names of the large-batch rows to consider.
        tolerance: Allowed accuracy gap (0.01 = one percentage point).

    Returns:
        ``{"best", "best_accuracy", "baseline_accuracy", "gap", "within"}``; ``gap`` is
        baseline minus best (negative when the best beats the baseline).

    Raises:
        KeyError: An unknown row name. ValueError: No candidates.
    """
    if not candidates:
        raise ValueError("give at least one candidate configuration")
    accuracy = summary["test_accuracy"]
    for name in [name for name in [baseline, *candidates] if name not in accuracy.index]:
        raise KeyError(f"no row {name!r} in the summary; rows: {', '.join(accuracy.index)}")
    best = max(candidates, key=lambda name: float(accuracy[name]))
    gap = float(accuracy[baseline]) - float(accuracy[best])
    return {"best": best, "best_accuracy": float(accuracy[best]),
            "baseline_accuracy": float(accuracy[baseline]), "gap": gap,
            "within": gap <= tolerance + 1e-12}


def plot_curves(table: Any, target: float | None = None, title: str = "") -> Any:
    """Test accuracy and test loss against images seen, one line per configuration.

    Args:
        table: :func:`epoch_table`'s DataFrame.
        target: Draw the target accuracy as a dashed line (``None``: no line).
        title: Figure title.

    Returns:
        The matplotlib Figure (closed: show it with ``display``).
    """
    import matplotlib.pyplot as plt

    fig, (acc_ax, loss_ax) = plt.subplots(1, 2, figsize=(12, 4))
    for name, rows in table.groupby("config", sort=False):
        acc_ax.plot(rows["samples"], rows["test_accuracy"], marker="o", label=name)
        loss_ax.plot(rows["samples"], rows["test_loss"], marker="o", label=name)
    if target is not None:
        acc_ax.axhline(target, color="grey", linestyle="--", label=f"target {target:.2f}")
    for ax, what in ((acc_ax, "test accuracy"), (loss_ax, "test loss")):
        ax.set(xlabel="training images seen (equal budget for every configuration)", ylabel=what)
        ax.grid(alpha=0.3)
    acc_ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig
