"""Read a Horovod timeline and show where a step's communication time goes.

``horovodrun --timeline-filename F`` (or ``HOROVOD_TIMELINE=F``) makes rank 0 write a Chrome-trace
JSON array: every tensor is a trace "process" (``ph: "M"``, ``process_name``), and each
all-reduce of it is a pair of top-level phases, ``NEGOTIATE_ALLREDUCE`` (the ranks announce that
the tensor is ready; one ``X`` tick per rank) then ``ALLREDUCE``, which holds nested phases such
as ``MEMCPY_IN_FUSION_BUFFER``, ``GLOO_ALLREDUCE`` / ``MPI_ALLREDUCE`` and
``MEMCPY_OUT_FUSION_BUFFER``. Phases are ``B``/``E`` events in microseconds; the ``E`` closing an
``ALLREDUCE`` carries the tensor's dtype and shape.

- :func:`read_timeline` parses a file, also one still being written (no closing ``]``, a trailing
  comma, a half-written last line); a file holding no event (Horovod's known ``[``-only file)
  raises :class:`TimelineError` saying why and what to do.
- :func:`phase_table` turns the events into one row per phase (pandas), numbered by step.
- :func:`step_times` and :func:`step_summary` measure steps and phases; :func:`plot_step` draws
  one step as a Gantt chart. Open the raw file in https://ui.perfetto.dev or chrome://tracing.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas

__all__ = ["TimelineError", "read_timeline", "trim_timeline", "phase_table", "step_times",
           "step_summary", "plot_step", "PHASE_COLOURS", "phase_colour", "negotiation_skew"]

#: Phases that are a tensor's own top-level activity (the rest are nested in ALLREDUCE etc.).
TOP_LEVEL = ("NEGOTIATE_ALLREDUCE", "ALLREDUCE")

#: One colour per phase, the same in every chart (a phase a chart does not show keeps its colour elsewhere).
PHASE_COLOURS = {
    "NEGOTIATE_ALLREDUCE": "#9e9e9e", "ALLREDUCE": "#1f77b4", "MEMCPY_IN_FUSION_BUFFER": "#2ca02c",
    "GLOO_ALLREDUCE": "#d62728", "MPI_ALLREDUCE": "#9467bd", "MEMCPY_OUT_FUSION_BUFFER": "#ff7f0e",
    "INIT_FUSION_BUFFER": "#8c564b", "NEGOTIATE_BROADCAST": "#bcbd22", "BROADCAST": "#17becf",
}


class TimelineError(ValueError):
    """A timeline file is missing, empty, or not a Horovod (Chrome-trace) timeline."""


def _salvage(text: str) -> list[dict]:
    """Parse a JSON array that may lack its end: drop a half-written tail, close the array."""
    body = text.strip()
    if not body.startswith("["):
        raise TimelineError("not a Chrome-trace JSON array (it does not start with '['); "
                            "pass the file named by --timeline-filename / HOROVOD_TIMELINE")
    try:
        data = json.loads(body)
        if isinstance(data, list):
            return data
    except ValueError:
        pass
    events: list[dict] = []
    decoder = json.JSONDecoder()
    position = 1
    while position < len(body):
        while position < len(body) and body[position] in " \t\r\n,":
            position += 1
        if position >= len(body) or body[position] == "]":
            break
        try:
            event, position = decoder.raw_decode(body, position)
        except ValueError:
            break  # the half-written last event of a file still being written
        events.append(event)
    return events


def read_timeline(path: str | os.PathLike[str]) -> list[dict]:
    """Read the events of a Horovod timeline, tolerating a file that is still being written.

    Args:
        path: The file given to ``--timeline-filename`` (written by rank 0).

    Returns:
        The trace events (dicts with ``ph``, ``pid``, ``ts``, ...), in file order.

    Raises:
        TimelineError: The file does not exist, is not a JSON array, or holds no event — e.g.
            only ``[``, which Horovod leaves when the run ended (or was read) before its writer
            thread flushed anything (horovod#1531, #2449).
    """
    file = Path(path)
    if not file.is_file():
        raise TimelineError(f"no timeline file at {file}: pass --timeline-filename {file} to "
                            "horovodrun (rank 0 writes it) and check that the run reached training")
    events = [e for e in _salvage(file.read_text(errors="replace")) if isinstance(e, dict)]
    if not any(e.get("ph") in ("B", "E", "X") for e in events):
        raise TimelineError(
            f"{file} holds no timeline event (only {file.stat().st_size} bytes): Horovod had not "
            "written any yet (a known failure mode leaves just '['). Read it after the run has "
            "finished, and let the run do at least a few steps of all-reduce")
    return events


def trim_timeline(events: list[dict], steps: int) -> list[dict]:
    """The events up to the end of the first ``steps`` training steps (metadata kept).

    Useful to keep a small excerpt of a long run (Perfetto opens it at once); the course's test
    fixture was made this way.

    Raises:
        ValueError: If the timeline holds fewer than ``steps`` steps.
    """
    table = phase_table(events)
    ends = table[(table["step"] >= 0) & (table["depth"] == 0)].groupby("step")["end_ms"].max()
    if len(ends) < steps:
        raise ValueError(f"the timeline holds {len(ends)} steps, fewer than {steps}")
    origin = min(float(e["ts"]) for e in events if e.get("ph") in ("B", "E", "X") and "ts" in e)
    cut = origin + ends.iloc[steps - 1] * 1e3
    return [e for e in events if e.get("ph") == "M" or float(e.get("ts", 0)) <= cut]


def phase_table(events: list[dict]) -> "pandas.DataFrame":
    """One row per phase: which tensor, which phase, when, how deep, and the step it belongs to.

    Args:
        events: From :func:`read_timeline`.

    Returns:
        Columns ``tensor``, ``phase``, ``depth`` (0 = top level), ``start_ms``, ``end_ms``,
        ``duration_ms`` (times relative to the first event), ``occurrence`` (k-th top-level
        phase of that name for that tensor, from 0), ``step`` (``occurrence`` for tensors
        all-reduced at every step, i.e. as often as the most frequent tensor; else -1),
        ``dtype`` and ``shape`` (from the closing event, when Horovod wrote them). Phases
        never closed (a truncated file) are left out.
    """
    import pandas as pd

    names = {e["pid"]: e.get("args", {}).get("name", str(e["pid"])) for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    timed = [e for e in events if e.get("ph") in ("B", "E", "X") and "ts" in e]
    origin = min((float(e["ts"]) for e in timed), default=0.0)
    stacks: dict[tuple[Any, Any], list[dict]] = {}
    rows: list[dict[str, Any]] = []
    for e in timed:
        key = (e.get("pid"), e.get("tid"))
        if e["ph"] == "B":
            stacks.setdefault(key, []).append(e)
        elif e["ph"] == "E" and stacks.get(key):
            begin = stacks[key].pop()
            args = {**begin.get("args", {}), **e.get("args", {})}
            rows.append({"tensor": names.get(e.get("pid"), str(e.get("pid"))),
                         "phase": begin.get("name", "?"), "depth": len(stacks[key]),
                         "start_ms": (float(begin["ts"]) - origin) / 1e3,
                         "end_ms": (float(e["ts"]) - origin) / 1e3,
                         "dtype": args.get("dtype"), "shape": args.get("shape")})
    columns = ["tensor", "phase", "depth", "start_ms", "end_ms", "duration_ms", "occurrence",
               "step", "dtype", "shape"]
    if not rows:
        return pd.DataFrame(columns=columns)
    table = pd.DataFrame(rows).sort_values(["start_ms", "depth"], ignore_index=True)
    table["duration_ms"] = table["end_ms"] - table["start_ms"]
    top = table["depth"] == 0
    table["occurrence"] = -1
    table.loc[top, "occurrence"] = table[top].groupby(["tensor", "phase"]).cumcount()
    # Nested phases belong to the top-level phase of the same tensor that encloses them.
    for index in table.index[~top]:
        row = table.loc[index]
        parent = table[top & (table["tensor"] == row["tensor"]) & (table["start_ms"] <= row["start_ms"])
                       & (table["end_ms"] >= row["end_ms"])]
        if len(parent):
            table.loc[index, "occurrence"] = parent["occurrence"].iloc[-1]
    counts = table[top & (table["phase"] == "ALLREDUCE")].groupby("tensor").size()
    every_step = set(counts[counts == counts.max()].index) if len(counts) else set()
    table["step"] = table["occurrence"].where(table["tensor"].isin(every_step), -1)
    return table[columns]


def step_times(table: "pandas.DataFrame") -> "pandas.DataFrame":
    """Per step: when its first tensor was announced, when its last all-reduce ended.

    Returns:
        One row per step: ``step``, ``start_ms`` (first NEGOTIATE of the step), ``ready_ms``
        (last tensor announced by rank 0 = backprop done on rank 0), ``end_ms`` (last ALLREDUCE
        ended), ``interval_ms`` (start of the next step minus this one's start: the step time,
        NaN for the last), ``comm_ms`` (union of time with any nested communication phase
        running), ``overlap_ms`` (communication before ``ready_ms``: all-reduce running while
        later gradients were still being computed).
    """
    import pandas as pd

    steps = table[table["step"] >= 0]
    rows = []
    for step, group in steps.groupby("step", sort=True):
        top = group[group["depth"] == 0]
        negotiate = top[top["phase"] == "NEGOTIATE_ALLREDUCE"]
        ready = float(negotiate["start_ms"].max()) if len(negotiate) else float(top["start_ms"].min())
        comm = group[(group["depth"] > 0) & group["phase"].str.endswith("_ALLREDUCE")]
        spans = sorted(zip(comm["start_ms"], comm["end_ms"]))
        total = before = 0.0
        cursor = -float("inf")
        for start, end in spans:
            start = max(start, cursor)
            if end > start:
                total += end - start
                before += max(0.0, min(end, ready) - start)
                cursor = end
        rows.append({"step": int(step), "start_ms": float(top["start_ms"].min()),
                     "ready_ms": ready, "end_ms": float(top["end_ms"].max()),
                     "comm_ms": total, "overlap_ms": before})
    frame = pd.DataFrame(rows, columns=["step", "start_ms", "ready_ms", "end_ms", "comm_ms",
                                        "overlap_ms"])
    frame["interval_ms"] = frame["start_ms"].shift(-1) - frame["start_ms"]
    return frame


def step_summary(table: "pandas.DataFrame", step: int) -> "pandas.DataFrame":
    """What each phase of one step took: tensors involved, wall-clock time, dtypes.

    Returns:
        One row per phase name, in order of first appearance: ``tensors`` (how many tensors
        went through it), ``count`` (how many times it ran: a fused all-reduce runs once for
        several tensors), ``wall_ms`` (union of its intervals, so a fused phase counts once)
        and ``dtypes`` (as Horovod recorded them; ``float16`` when compressed).
    """
    import pandas as pd

    rows = table[table["step"] == step]
    out = []
    for phase, group in rows.groupby("phase", sort=False):
        spans = sorted(set(zip(group["start_ms"], group["end_ms"])))
        wall, cursor = 0.0, -float("inf")
        for start, end in spans:
            start = max(start, cursor)
            if end > start:
                wall += end - start
                cursor = end
        dtypes = sorted({str(d) for d in group["dtype"] if isinstance(d, str)})
        out.append({"phase": phase, "tensors": group["tensor"].nunique(), "count": len(spans),
                    "wall_ms": wall, "dtypes": ",".join(dtypes)})
    return pd.DataFrame(out, columns=["phase", "tensors", "count", "wall_ms", "dtypes"])


def plot_step(table: "pandas.DataFrame", step: int, ax: Any = None, title: str | None = None) -> Any:
    """Gantt chart of one step: a row per tensor, a bar per phase (nested phases drawn thinner).

    Args:
        table: From :func:`phase_table`.
        step: Which step (the ``step`` column; pick one after the first, which traces graphs).
        ax: A matplotlib Axes; a new figure when ``None``.
        title: Title of the chart.

    Returns:
        The Axes (display its figure; do not return it bare from a cell).

    Raises:
        ValueError: If the table has no phases for that step.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = table[table["step"] == step]
    if rows.empty:
        raise ValueError(f"no phases for step {step}; steps present: "
                         f"{sorted(set(table['step'][table['step'] >= 0]))}")
    tensors = list(dict.fromkeys(rows.sort_values("start_ms")["tensor"]))
    shapes = rows.dropna(subset=["shape"]).groupby("tensor")["shape"].first()
    origin = rows["start_ms"].min()
    colours = {p: phase_colour(p) for p in dict.fromkeys(rows["phase"])}
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.45 * len(tensors) + 1.5))
    for _, row in rows.iterrows():
        y = tensors.index(row["tensor"])
        height = 0.7 if row["depth"] == 0 else 0.35
        ax.barh(y, row["duration_ms"], left=row["start_ms"] - origin, height=height,
                color=colours[row["phase"]], alpha=0.5 if row["depth"] == 0 else 0.95,
                edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(tensors)))
    ax.set_yticklabels([f"{_short(t.rsplit('HorovodAllreduce_', 1)[-1])} {shapes.get(t, '')}"
                        for t in tensors], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms since the step's first tensor was announced (step {step})")
    ax.set_title(title or "Horovod timeline: one training step")
    ax.legend(handles=[Patch(color=c, label=p) for p, c in colours.items()], fontsize=7,
              loc="upper left", bbox_to_anchor=(0.0, -0.18), ncol=2, frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    return ax


def _short(name: str, width: int = 24) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1):]


def phase_colour(phase: str) -> str:
    """The colour of ``phase`` in every chart (:data:`PHASE_COLOURS`; another phase gets a fixed grey-blue)."""
    return PHASE_COLOURS.get(phase, "#7f7f9f")


def negotiation_skew(events: list[dict], table: "pandas.DataFrame") -> "pandas.DataFrame":
    """For every ``NEGOTIATE_ALLREDUCE`` of a step: how long it lasted and how far apart the ranks announced.

    A full negotiation (the first time Horovod sees a tensor) holds one tick per rank (an ``X`` event named by
    the rank) at the moment the coordinator counted that rank's request. The skew is the last tick minus the
    first: the time one rank waited for the other to reach the same gradient (a straggler, notebook 01). A
    negotiation much longer than its skew waited on something else (the cycle, the coordinator). Later
    negotiations go through Horovod's response cache (one bit-vector all-reduce per cycle) and carry no ticks:
    their bar runs from the first cycle in which any rank had the tensor to the first in which all had it, so
    its length is itself the skew, to within a cycle.

    Args:
        events: From :func:`read_timeline`.
        table: :func:`phase_table` of the same events.

    Returns:
        One row per negotiation with at least two ticks: ``tensor``, ``step``, ``negotiate_ms``, ``skew_ms``,
        ``last_rank`` (the rank that announced last).
    """
    import pandas as pd

    names = {e["pid"]: e.get("args", {}).get("name", str(e["pid"])) for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    timed = [e for e in events if e.get("ph") in ("B", "E", "X") and "ts" in e]
    origin = min((float(e["ts"]) for e in timed), default=0.0)
    ticks: dict[str, list[tuple[float, str]]] = {}
    for e in events:
        if e.get("ph") == "X" and str(e.get("name", "")).isdigit() and "ts" in e:
            tensor = names.get(e.get("pid"), str(e.get("pid")))
            ticks.setdefault(tensor, []).append(((float(e["ts"]) - origin) / 1e3, str(e["name"])))
    rows = []
    negotiations = table[(table["phase"] == "NEGOTIATE_ALLREDUCE") & (table["step"] >= 0)]
    for _, row in negotiations.iterrows():
        inside = sorted(t for t in ticks.get(row["tensor"], []) if row["start_ms"] - 1e-3 <= t[0] <= row["end_ms"] + 1e-3)
        if len({rank for _, rank in inside}) < 2:
            continue
        rows.append({"tensor": row["tensor"], "step": int(row["step"]), "negotiate_ms": row["duration_ms"],
                     "skew_ms": inside[-1][0] - inside[0][0], "last_rank": int(inside[-1][1])})
    return pd.DataFrame(rows, columns=["tensor", "step", "negotiate_ms", "skew_ms", "last_rank"])
