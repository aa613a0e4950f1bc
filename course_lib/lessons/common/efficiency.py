"""Distribution efficiency: a data-parallel run against its bound, in one format everywhere.

The **bound** of a data-parallel run on N workers is N copies of its one-worker script, started together, each
on the cores or GPU a rank would get, each training its own shard at the same per-worker batch, never
communicating (:func:`course_lib.runner.multiworker.run_bound`). No way of distributing the work can beat it, so

    distribution efficiency = the run's images/s / its bound's images/s  (≤ 1 but for noise).

A second yardstick answers another question (is distributing worth it at all?): **one process using every
core at the same global batch**. It is not a bound; a distributed run can beat it (notebook 02 shows both).

Both are decided on launches paired within rounds (:func:`course_lib.lessons.common.paired_runs.launch_ratio`).
:func:`efficiency_line` prints an efficiency in the course's one format (``tests/test_efficiency_lines.py``
parses every such line in the committed notebooks and results files and fails on an interval wholly above 1),
with the verdict of :func:`bound_verdict`: a run above its bound by more than the noise says the bound failed
(a disturbed bound run, or a bound that did not run the same per-worker step), never that the method beat it.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Mapping, Sequence

from course_lib.lessons.common.measured import in_words
from course_lib.lessons.common.paired_runs import Paired
from course_lib.training.stats import ci_verdict, mean_ci95

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure

__all__ = ["BOUND", "ONE_PROCESS", "EFFICIENCY_LINE", "bound_verdict", "efficiency_line", "parse_efficiency_lines",
           "plot_yardsticks"]

#: The names of the two yardsticks, as every notebook, figure and results file prints them.
BOUND = "the bound (N independent one-worker copies, no communication)"
ONE_PROCESS = "one process on every core, same global batch"

#: The printed form of :func:`efficiency_line` (its numbers are masked by nbval: ``≈`` and ``±``).
EFFICIENCY_LINE = re.compile(r"distribution efficiency ≈(?P<mean>-?\d+(?:\.\d+)?|nan) ± (?P<ci>\d+(?:\.\d+)?|nan) "
                             r"of (?:its|the) bound")


def bound_verdict(ratio: Paired) -> str:
    """What an efficiency says about its bound: within it, or above it by more than the noise.

    Returns:
        ``"within its bound"`` when the interval's lower end is at most 1; ``"above its bound: the bound failed
        (…)"`` when the whole interval lies above 1; ``"cannot tell"`` without an interval (one round).
    """
    if math.isnan(ratio.ci95) or math.isnan(ratio.mean):
        return "cannot tell whether it stayed within its bound (one round: no interval)"
    above = ci_verdict(ratio.mean, ratio.ci95, 1.0)
    return in_words(above is True, "above its bound: the bound failed (a disturbed bound launch, or not the same "
                    "per-worker step); no method can beat N workers that never communicate", "within its bound")


def efficiency_line(name: str, ratio: Paired) -> str:
    """``"Horovod, 2 workers: distribution efficiency ≈0.86 ± 0.05 of its bound (95 %, 4 rounds): within its bound"``.

    Args:
        name: The run, e.g. ``"Horovod, 2 workers"``.
        ratio: The run over its bound, launch by launch (:func:`course_lib.lessons.common.paired_runs.launch_ratio`).
    """
    return (f"{name}: distribution efficiency ≈{ratio.mean:.2f} ± {ratio.ci95:.2f} of its bound "
            f"(95 %, {ratio.samples()}): {bound_verdict(ratio)}")


def parse_efficiency_lines(text: str) -> list[tuple[float, float]]:
    """``(mean, half-width)`` of every efficiency line in ``text`` (a notebook's outputs, a results file)."""
    return [(float(m["mean"]), float(m["ci"])) for m in EFFICIENCY_LINE.finditer(text)]


def plot_yardsticks(rates: Mapping[str, Sequence[float]], *, title: str = "") -> "matplotlib.figure.Figure":
    """Images/s of a distributed run beside its two yardsticks, one bar each with its 95 % interval over launches.

    Args:
        rates: ``{label: the images/s of each launch}``, in the order to draw (e.g. the run, :data:`BOUND`,
            :data:`ONE_PROCESS`); each list holds one value per round.
        title: The figure's title.

    Returns:
        A ``matplotlib.figure.Figure``; show it with :func:`course_lib.lessons.common.display.show_figure`.

    Raises:
        ValueError: No rates, or a label without launches.
    """
    from matplotlib.figure import Figure

    if not rates or any(not values for values in rates.values()):
        raise ValueError("plot_yardsticks needs at least one launch per label")
    stats = [mean_ci95([float(v) for v in values]) for values in rates.values()]
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    ax = fig.subplots()
    labels = list(rates)
    ax.barh(range(len(labels)), [m for m, _ in stats], xerr=[0.0 if math.isnan(h) else h for _, h in stats],
            capsize=5, color=["tab:blue"] + ["tab:grey"] * (len(labels) - 1))
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"images / s (mean of {len(next(iter(rates.values())))} launches, 95 % interval)")
    ax.set_xlim(left=0)
    fig.suptitle(title or "a run and its yardsticks")
    return fig
