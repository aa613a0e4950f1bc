"""Notebook 07's comparison: one job four ways, each row's checks, its efficiency against its bound, and the concept map.

Each way (MirroredStrategy, Horovod, PyTorch DDP, Keras 3 on JAX) is a launched run of a course script printing
the course's JSON lines (launched by :mod:`course_lib.lessons.frameworks.job`). :func:`job_row` reads what the run
says it did (learning rate, per-worker batch, images, steps, timed window) and its two checks: identical weights on
every replica (its ``digest`` events) and every training image exactly once
(:func:`course_lib.lessons.common.coverage.check_coverage`). :func:`same_job` says whether the rows are one job.
:func:`efficiency_rows` divides each way by ITS OWN bound, launch by launch within rounds
(:func:`course_lib.lessons.common.paired_runs.launch_ratio`), printed by the course's one format
(:func:`course_lib.lessons.common.efficiency.efficiency_line`), with the bound's images/s.
:func:`resolution_line` says when the notebook's rounds cannot resolve an efficiency to the asked precision and
how many rounds would (``make bench``). The concept map's verdicts (DDP's knobs) are
:mod:`course_lib.lessons.frameworks.ddp_knobs`'s.

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from course_lib.lessons.common.coverage import check_coverage
from course_lib.lessons.common.efficiency import efficiency_line
from course_lib.lessons.common.paired_runs import Paired, launch_rate, launch_ratio
from course_lib.training.stats import mean_ci95, t_critical_95

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    from matplotlib.figure import Figure

__all__ = ["replica_digests", "identical_weights", "timed_window", "job_row", "rows_table", "JOB_FIELDS", "same_job",
           "efficiency_rows", "rounds_needed", "resolution_line", "plot_rows", "step_split_line", "summary"]

#: The fields that make the rows one job: each must be the same in every row.
JOB_FIELDS = ("lr", "per-worker batch", "images", "steps per epoch", "timed window")
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


def timed_window(run: Any) -> str:
    """Which part of each timed epoch a run's images/s cover, read from its ``epoch`` events.

    Every course script times its epochs with :class:`course_lib.training.throughput.ThroughputMeter`, which
    leaves out no step or the first one (``warmup_steps`` 0 or 1): an epoch whose rate spans every step has
    ``steps × step_time_ms`` equal to its whole ``epoch_time_s``; one that left step 1 out spans less.

    Returns:
        ``"from the end of step 1"``, ``"every step (step 1 counted)"``, ``"mixed"`` (epochs differ) or
        ``"unknown"`` (events without the meter's fields).
    """
    found = set()
    for event in run.epochs:
        if event.get("warmup") or not {"steps", "step_time_ms", "epoch_time_s"} <= set(event):
            found.add("unknown") if not event.get("warmup") else None
            continue
        spanned = event["steps"] * event["step_time_ms"] / 1000.0
        found.add("every step (step 1 counted)" if math.isclose(spanned, event["epoch_time_s"], rel_tol=1e-6)
                  else "from the end of step 1")
    if not found:
        return "unknown"
    return found.pop() if len(found) == 1 else "mixed"


def job_row(name: str, run: Any, *, replicas: int, readers: int | None = None,
            digests: Mapping[int, str] | None = None) -> dict[str, Any]:
    """One row of the table: what the way ran (from its own ``config`` and ``epoch`` events) and its two checks.

    Args:
        name: The way (``"PyTorch DDP"``).
        run: Its launched run (a :class:`course_lib.runner.runlog.RunResult`).
        replicas: Replicas it trained (ranks, or devices of one process).
        readers: Processes that each read a shard (1 when one process feeds every replica); default: the run's.
        digests: The replicas' digests when the run reports one copy only (:func:`replica_digests`).

    Returns:
        ``{"way", "replicas", "lr", "per-worker batch", "images", "steps per epoch", "timed window",
        "identical weights", "every image once"}``; steps per epoch are each worker's (a step of one process
        feeding every replica is one step of each replica).
    """
    config = run.config or {}
    return {"way": name, "replicas": replicas, "lr": config.get("lr"),
            "per-worker batch": config.get("per_worker_batch"), "images": config.get("train_size"),
            "steps per epoch": config.get("steps_per_epoch"), "timed window": timed_window(run),
            "identical weights": identical_weights(run, replicas, digests),
            "every image once": check_coverage(run.events, readers=readers).ok}


def rows_table(rows: Sequence[Mapping[str, Any]]) -> "pandas.DataFrame":
    """The rows as a table indexed by way."""
    import pandas as pd

    return pd.DataFrame(list(rows)).set_index("way")


def same_job(rows: Sequence[Mapping[str, Any]]) -> tuple[bool, list[str]]:
    """Whether the rows are one job: each of :data:`JOB_FIELDS` the same in every row.

    Returns:
        ``(all the same, lines)``: one line per field, ``"same lr in every row: True"``, or ``False`` with each
        way's value, so that rows trained differently are flagged, never set side by side silently.
    """
    lines, ok = [], True
    for key in JOB_FIELDS:
        values = {row["way"]: row.get(key) for row in rows}
        same = len({repr(v) for v in values.values()}) == 1 and None not in values.values()
        ok &= same
        shown = "" if same else " (" + ", ".join(f"{way}: {value}" for way, value in values.items()) + ")"
        lines.append(f"same {key} in every row: {same}{shown}")
    return ok, lines


def efficiency_rows(rounds: Sequence[Mapping[str, Any]], ways: Sequence[str],
                    bound_of: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each way over its own bound, launch by launch within each round, and the bound's images/s.

    Args:
        rounds: One ``{launch name: RunResult}`` per round (:func:`course_lib.lessons.frameworks.job.run_rounds`).
        ways: The ways, in the order to show them.
        bound_of: Each way's bound's launch name.

    Returns:
        Per way ``{"way", "efficiency": Paired, "line", "images/s", "bound images/s", "bound ci95"}``: the
        efficiency (:func:`launch_ratio`, one sample per round), its line in the course's one format
        (:func:`efficiency_line`), the way's and its bound's images/s (mean over rounds of each launch's mean
        timed epoch; the bound's with its 95 % interval over rounds).
    """
    out = []
    for way in ways:
        pairs = [(r[way], r[bound_of[way]]) for r in rounds]
        ratio = launch_ratio(pairs)
        bound, bound_ci = mean_ci95([launch_rate(b) for _, b in pairs])
        out.append({"way": way, "efficiency": ratio, "line": efficiency_line(f"{way}, {_workers(pairs)}", ratio),
                    "images/s": mean_ci95([launch_rate(w) for w, _ in pairs])[0], "bound": bound_of[way],
                    "bound images/s": bound, "bound ci95": bound_ci})
    return out


def _workers(pairs: Sequence[tuple[Any, Any]]) -> str:
    config = pairs[0][0].config or {}
    count = config.get("workers") or config.get("replicas")
    return f"{count} workers" if count else "N workers"


def rounds_needed(ratio: Paired, half_width: float) -> int | None:
    """Rounds that would bring ``ratio``'s 95 % interval to ``± half_width``, from its own spread (a pilot).

    The spread over rounds, ``s = ci95 · √n / t(n−1)``, is taken as the population's; the answer is the
    smallest ``m ≥ 2`` with ``t(m−1) · s / √m ≤ half_width``. ``None`` without a spread (one round).
    """
    if ratio.pairs < 2 or not math.isfinite(ratio.ci95):
        return None
    spread = ratio.ci95 * math.sqrt(ratio.pairs) / t_critical_95(ratio.pairs - 1)
    m = 2
    while t_critical_95(m - 1) * spread / math.sqrt(m) > half_width:
        m += 1
    return m


def resolution_line(way: str, ratio: Paired, *, half_width: float = 0.05, section: str = "1f") -> str:
    """Whether this notebook's rounds resolve ``way``'s efficiency to ``± half_width``; if not, where it is.

    Returns:
        ``"measured: <way>: efficiency resolved to ±0.05 in 3 rounds: True"``, or ``False`` with ``cannot tell its
        efficiency to ±0.05 here`` and the ``make bench`` section and round count (:func:`rounds_needed`, from these
        rounds as a pilot). A ``measured:`` line (nbval masks it): which way it comes out depends on the noise.
    """
    if math.isfinite(ratio.ci95) and ratio.ci95 <= half_width:
        return f"measured: {way}: efficiency resolved to ±{half_width:.2f} in {ratio.samples()}: True"
    needed = rounds_needed(ratio, half_width)
    more = f"≈{needed} rounds" if needed else "more rounds"
    return (f"measured: {way}: efficiency resolved to ±{half_width:.2f} in {ratio.samples()}: False: cannot tell its "
            f"efficiency to ±{half_width:.2f} here; `make bench` section {section} runs the same launches in "
            f"{more} (estimated from these)")


def plot_rows(rows: Sequence[Mapping[str, Any]], *,
              title: str = "each way's images/s over its own bound (N one-worker copies, no communication)") -> "Figure":
    """Each way's distribution efficiency as a bar with its 95 % interval over rounds, and the bound at 1.

    Args:
        rows: :func:`efficiency_rows`.
        title: The figure's title.

    Returns:
        The figure (show it with ``display.show_figure``).
    """
    import matplotlib.pyplot as plt  # late: matplotlib is heavy and only figures need it

    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    ordered = list(rows)[::-1]   # the first way on top
    ratios = [float(r["efficiency"].mean) for r in ordered]
    spreads = [float(r["efficiency"].ci95) if math.isfinite(r["efficiency"].ci95) else 0.0 for r in ordered]
    ax.barh([r["way"] for r in ordered], ratios, xerr=spreads, color="tab:blue", alpha=0.7, capsize=4)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set(xlabel="distribution efficiency: images/s over the bound's (95 % interval over rounds)", title=title)
    ax.set_xlim(0, max(1.2, max(r + s for r, s in zip(ratios, spreads)) * 1.05))
    fig.tight_layout()
    plt.close(fig)
    return fig


def step_split_line(run: Any, step_ms: float, *, name: str = "Keras 3 on JAX, one device") -> str:
    """A step's time split into compile, dispatch and kernels, from a ``keras3_fmnist.py --step-split`` run.

    Dispatch and kernels are measured in the same calls, so their shares add up; ``fit``'s own step time (the same
    launch's timed epochs) is printed beside them, not subtracted from them (the two are measured apart, a few
    seconds apart, and a residual of two noisy figures can come out negative).

    Args:
        run: The run whose (first) ``step_split`` event to read (a bound launch: copy 0's).
        step_ms: The step time of ``fit`` in the same launch (ms per step of its timed epochs).
        name: The way, as printed.

    Returns:
        ``"<name>: compiling the train step took 1900 ms, once; then a step = dispatch 0.6 ms + kernels 185 ms:
        kernels ≈100% of it; fit's step in the same launch: 188 ms"``.

    Raises:
        ValueError: The run printed no ``step_split`` event.
    """
    splits = [e for _, e in run.events if e.get("event") == "step_split"]
    if not splits:
        raise ValueError("the run printed no step_split event: run keras3_fmnist.py with --step-split STEPS --json")
    split = splits[0]
    total = split["dispatch_ms"] + split["kernel_ms"]
    return (f"{name}: compiling the train step took {split['compile_ms']:.0f} ms, once; then a step (mean of "
            f"{split['steps']}) = dispatch {split['dispatch_ms']:.1f} ms + kernels {split['kernel_ms']:.0f} ms: "
            f"kernels ≈{split['kernel_ms'] / total:.0%} of it; fit's step in the same launch: {step_ms:.0f} ms")


def summary(rows: "pandas.DataFrame", *, extra: Sequence[str] = ()) -> list[str]:
    """The summary's sentences, printed from the table (and the concept map's verdicts in ``extra``)."""
    all_same = bool(rows["identical weights"].all())
    all_once = bool(rows["every image once"].all())
    ways = ", ".join(rows.index)
    return [f"{len(rows)} ways ({ways}): identical weights on every replica in each: {all_same}",
            f"every training image exactly once per epoch in each: {all_once}", *extra]
