"""An elastic Horovod run, epoch by epoch: the table of rank 0's epoch events and its figure.

* :func:`epoch_table`: one row per finished epoch (``epoch``, ``workers``, ``steps`` per worker, ``lr``,
  ``epoch_time_s``, ``loss``), from the ``epoch`` events of the group's rank 0;
* :func:`plot_epochs`: each epoch's time, coloured by the size of the group that ran it, and the training loss,
  so that a reset shows as a change of colour and the loss goes on from where the last commit left it.

Introduced in notebooks/06_beyond_one_machine.ipynb (section 2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

    from course_lib.runner.runlog import RunResult

__all__ = ["COLUMNS", "epoch_table", "plot_epochs"]

#: The columns of :func:`epoch_table`, in order.
COLUMNS = ("epoch", "workers", "steps", "lr", "epoch_time_s", "loss")


def epoch_table(result: "RunResult") -> "pandas.DataFrame":
    """Rank 0's ``epoch`` events of ``result`` as a table, one row per epoch, in the order they ended.

    Raises:
        ValueError: The run printed no epoch event, or its events lack one of :data:`COLUMNS`.
    """
    import pandas as pd  # late: pandas is heavy and only the notebook's tables need it

    if not result.epochs:
        raise ValueError("the run printed no epoch event: did it start training? (see its output above)")
    missing = [c for c in COLUMNS if any(c not in e for e in result.epochs)]
    if missing:
        raise ValueError(f"epoch events without {missing}: the script's epoch callback is not the course's "
                         "(course_lib.training.drills.epoch_events)")
    return pd.DataFrame(result.epochs)[list(COLUMNS)].reset_index(drop=True)


def plot_epochs(table: "pandas.DataFrame", *, title: str = "the elastic run, epoch by epoch") -> "Figure":
    """Each epoch's time as a bar coloured by its group's size (steps per worker written on it), and the loss.

    Args:
        table: :func:`epoch_table`'s rows.
        title: The figure's title.

    Returns:
        The figure (show it with ``display.show_figure``).
    """
    import matplotlib.pyplot as plt  # late: matplotlib is heavy and only figures need it

    sizes = sorted(set(int(w) for w in table["workers"]), reverse=True)
    colours: dict[int, Any] = {size: plt.get_cmap("tab10")(k) for k, size in enumerate(sizes)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.2))
    for size in sizes:
        rows = table[table["workers"] == size]
        bars = left.bar(rows["epoch"], rows["epoch_time_s"], color=colours[size],
                        label=f"{size} worker{'s' if size > 1 else ''}")
        left.bar_label(bars, labels=[f"{int(s)} steps" for s in rows["steps"]], fontsize=8)
    left.set(xlabel="epoch", ylabel="seconds", title="time of each epoch (colour: group size)",
             xticks=list(table["epoch"]))
    left.margins(y=0.2)
    left.legend(fontsize=8)
    right.plot(table["epoch"], table["loss"], marker="o", color="black")
    for _, row in table.iterrows():
        right.plot(row["epoch"], row["loss"], marker="o", color=colours[int(row["workers"])], markersize=9)
    right.set(xlabel="epoch", ylabel="loss (group average)", title="training loss",
              xticks=list(table["epoch"]))
    fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig
