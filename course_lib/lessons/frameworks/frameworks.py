"""Notebook 07's comparison: one job four ways, each row's checks, and the concept map's measured verdicts.

Each way (MirroredStrategy, Horovod, PyTorch DDP, Keras 3 on JAX) is a launched run of a course script printing
the course's JSON lines. :func:`framework_row` reads one: identical weights on every replica (its ``digest`` events),
every training image exactly once (:func:`course_lib.lessons.common.coverage.check_coverage` on its ``consumed`` events)
and its images/s over its own one-process ceiling, paired epoch by epoch
(:func:`course_lib.lessons.common.paired_runs.paired_ratio`, the one owner of the pairing). The concept map's verdicts are
decided here from counts the DDP script reports (all-reduce calls per epoch from its gradient hook, optimizer-state
bytes per rank), so each sentence a cell prints comes from the function that decides it.

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from course_lib.lessons.common.coverage import check_coverage
from course_lib.lessons.common.measured import in_words
from course_lib.lessons.common.paired_runs import Paired, paired_ratio
from course_lib.training.stats import ci_verdict

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    from matplotlib.figure import Figure

__all__ = ["replica_digests", "identical_weights", "framework_row", "rows_table", "ceiling_line", "plot_rows",
           "allreduce_calls", "bucket_verdict", "no_sync_verdict", "state_bytes", "zero_verdict", "summary"]


def replica_digests(model: Any, strategy: Any) -> dict[int, str]:
    """The digest of each replica's copy of a Keras model's weights under a ``tf.distribute`` strategy."""
    from course_lib.training.models import weights_digest  # late: models imports TensorFlow

    copies = [strategy.experimental_local_results(v) for v in model.weights]
    return {r: weights_digest([c[r].numpy() for c in copies]) for r in range(len(copies[0]))}


def identical_weights(run: Any, replicas: int, digests: Mapping[int, str] | None = None) -> bool:
    """True when ``replicas`` digests were reported (ranks or devices 0..N-1) and all are equal.

    Args:
        run: A run whose ``digests`` are ``{rank: digest}``.
        replicas: How many copies of the weights there must be.
        digests: Use these instead of the run's (MirroredStrategy's replicas, read in the notebook's process).
    """
    digests = getattr(run, "digests", {}) if digests is None else digests
    return sorted(digests) == list(range(replicas)) and len(set(digests.values())) == 1


def framework_row(name: str, run: Any, *, replicas: int, pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
                  readers: int | None = None, digests: Mapping[int, str] | None = None,
                  label: str | None = None) -> dict[str, Any]:
    """One row of the table: the way, its replicas, its two checks and its share of its ceiling.

    Args:
        name: The way (``"PyTorch DDP"``).
        run: Its launched run (a :class:`course_lib.runner.runlog.RunResult`).
        replicas: Replicas it trained (ranks, or devices of one process).
        pairs: ``(its rates, its ceiling's rates)`` per round, epoch by epoch (:func:`paired_ratio`).
        readers: Processes that each read a shard (1 when one process feeds every replica); default: the run's.
        digests: The replicas' digests when the run reports one copy only (:func:`replica_digests`).
        label: Read only the events of this run (``"mirrored"``: ``mirrored_fmnist.py --ceiling`` trains its
            ceiling in the same process and names every event's run).

    Returns:
        ``{"way", "replicas", "identical weights", "every image once", "of ceiling", "ci95", "pairs"}``.
    """
    ratio: Paired = paired_ratio(pairs)
    events = [(rank, e) for rank, e in run.events if label is None or e.get("run") == label]
    return {"way": name, "replicas": replicas, "identical weights": identical_weights(run, replicas, digests),
            "every image once": check_coverage(events, readers=readers).ok, "of ceiling": ratio.mean,
            "ci95": ratio.ci95, "pairs": ratio.pairs}


def rows_table(rows: Sequence[Mapping[str, Any]]) -> "pandas.DataFrame":
    """The rows as a table indexed by way."""
    import pandas as pd

    return pd.DataFrame(list(rows)).set_index("way")


def ceiling_line(way: str, ratio: float, ci95: float) -> str:
    """The ``measured:`` line of one row's share of its ceiling, as its 95 % interval decides it.

    A ceiling that uses every core makes 1 the most a way can reach; an interval wholly above 1 says that the
    one-process run was no ceiling (it left a core idle), wholly below 1 that distributing costs here.
    """
    verdict = ci_verdict(ratio, ci95, 1.0)
    said = in_words(verdict, "above its one-process run: that run left a core idle, so it is no ceiling here",
                    f"below its ceiling: distributing costs ≈{1 - ratio:.0%} of the images/s here",
                    "cannot tell it from its ceiling (the interval holds 1)")
    return f"measured: {way} at ≈{ratio:.2f} ± {ci95:.2f} of its ceiling: {said}"


def plot_rows(rows: "pandas.DataFrame", *, title: str = "each way's images/s over its own one-process run") -> "Figure":
    """Each way's share of its ceiling as a bar with its 95 % interval, and the line at 1 (the ceiling).

    Args:
        rows: :func:`rows_table`'s table.
        title: The figure's title.

    Returns:
        The figure (show it with ``display.show_figure``).
    """
    import matplotlib.pyplot as plt  # late: matplotlib is heavy and only figures need it

    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    ways = list(rows.index)[::-1]   # the first way on top
    ratios = [float(rows.loc[w, "of ceiling"]) for w in ways]
    spreads = [float(rows.loc[w, "ci95"]) for w in ways]
    ax.barh(ways, ratios, xerr=spreads, color="tab:blue", alpha=0.7, capsize=4)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set(xlabel="images/s over the one-process run (95 % interval of the paired epochs)", title=title)
    ax.set_xlim(0, max(1.2, max(r + s for r, s in zip(ratios, spreads)) * 1.05))
    fig.tight_layout()
    plt.close(fig)
    return fig


def allreduce_calls(run: Any) -> list[int]:
    """All-reduce calls per epoch that rank 0's gradient hook counted (``ddp_fmnist.py``'s ``epoch`` events)."""
    return [int(e["allreduce_calls"]) for e in run.epochs]


def bucket_verdict(calls_default: int, calls_small: int, steps: int) -> str:
    """What ``bucket_cap_mb`` did to one epoch's all-reduce calls (the counts of two runs of ``steps`` steps).

    Returns:
        A sentence: with the default buckets the whole gradient goes in ONE all-reduce per step (or in k), and
        smaller buckets cut it into more, smaller messages (or did not).
    """
    per_step, small_per_step = calls_default / steps, calls_small / steps
    first = (f"default buckets (25 MB): {per_step:g} all-reduce call(s) per step"
             + (": the whole gradient in one message" if per_step == 1 else ""))
    second = (f"bucket_cap_mb=1: {small_per_step:g} per step, the same bytes in more, smaller messages "
              f"(Horovod's fusion threshold, smaller)" if calls_small > calls_default
              else f"bucket_cap_mb=1: {small_per_step:g} per step, no more messages than the default")
    return f"{first}; {second}"


def no_sync_verdict(calls_every: int, calls_no_sync: int, steps: int, passes: int) -> str:
    """Whether ``no_sync`` over ``passes`` backward passes cut the all-reduce calls by that factor (per epoch)."""
    expected = -(-steps // passes) * (calls_every // steps)
    return (f"no_sync over {passes} backward passes: {calls_no_sync} all-reduce calls in an epoch instead of "
            f"{calls_every}; one per {passes} passes as Horovod's backward_passes_per_step={passes}: "
            f"{calls_no_sync == expected}")


def state_bytes(run: Any) -> dict[int, int]:
    """Optimizer-state bytes per rank (``ddp_fmnist.py``'s ``state`` events)."""
    found = {int(rank): int(e["optimizer_state_bytes"]) for rank, e in run.events if e.get("event") == "state"}
    return dict(sorted(found.items()))  # rank order, whichever rank's line came first


def zero_verdict(ddp: Mapping[int, int], zero: Mapping[int, int]) -> list[str]:
    """ZeRO's optimizer-state bytes per rank against DDP's, at the same number of ranks.

    Returns:
        Two sentences: whether the ranks' ZeRO shares add up to one DDP copy (nothing lost, nothing kept twice),
        and whether every rank holds less than a DDP rank, with the largest share's fraction (uneven when one
        parameter tensor is most of the model: ZeroRedundancyOptimizer hands out whole tensors).
    """
    copy = max(ddp.values())
    largest = max(zero.values())
    return [f"ZeRO's shares over {len(zero)} ranks add up to one DDP copy ({copy:,} bytes): "
            f"{sum(zero.values()) == copy}",
            f"every ZeRO rank holds less than a DDP rank: {largest < copy} (the largest share is "
            f"{largest / copy:.0%} of a copy; an even split would be {1 / len(zero):.0%})"]


def summary(rows: "pandas.DataFrame", *, extra: Sequence[str] = ()) -> list[str]:
    """The summary's sentences, printed from the table (and the concept map's verdicts in ``extra``)."""
    all_same = bool(rows["identical weights"].all())
    all_once = bool(rows["every image once"].all())
    ways = ", ".join(rows.index)
    return [f"{len(rows)} ways ({ways}): identical weights on every replica in each: {all_same}",
            f"every training image exactly once per epoch in each: {all_once}", *extra]
