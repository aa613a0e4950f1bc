"""The arithmetic of the benchmarks: medians, spread, ratios, efficiency, the Markdown table.

Everything here is plain Python (no TensorFlow, no numpy), so that it can be unit-tested on
synthetic timings (tests/test_benchmarks.py).

Conventions:

* A *sample* is one repeat of one variant (e.g. images/s of one run).
* Repeats are interleaved (A, B, C, A, B, C, ...): :func:`interleaved_schedule`.
* A ratio between two variants is reported as the ratio of their medians; its spread is the
  min–max of the per-round ratios (round i of A divided by round i of B), which cancels the
  drift that hits both variants of one round alike.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from course_lib.training.events import json_safe
from course_lib.training.stats import interval_verdict, scaling_efficiency

__all__ = [
    "BenchOptionError",
    "Summary",
    "Row",
    "median",
    "quantile",
    "summarize",
    "ratio_of_medians",
    "paired_ratios",
    "efficiency",
    "overhead_pct",
    "interleaved_schedule",
    "goal_met",
    "goal_verdict",
    "parse_only",
    "check_repeats",
    "fmt",
    "render_table",
]


class BenchOptionError(ValueError):
    """A benchmark option is invalid (raised before anything is measured)."""


@dataclass
class Summary:
    """Median and spread of a list of samples.

    Attributes:
        n: Number of samples.
        median: The median.
        minimum: Smallest sample. maximum: Largest sample.
        q1: First quartile. q3: Third quartile (linear interpolation, like numpy's default).
        samples: The samples, in the order measured.
    """

    n: int
    median: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    samples: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN becomes None)."""
        return json_safe(asdict(self))


def _finite(values: Iterable[float]) -> list[float]:
    out = []
    for v in values:
        v = float(v)
        if math.isfinite(v):
            out.append(v)
    return out


def quantile(values: Sequence[float], q: float) -> float:
    """Quantile ``q`` in [0, 1] with linear interpolation between order statistics.

    Args:
        values: Samples (NaN/inf are ignored).
        q: The quantile, 0 = minimum, 0.5 = median, 1 = maximum.

    Returns:
        The quantile; NaN when no finite sample is left.

    Raises:
        ValueError: ``q`` outside [0, 1].
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    data = sorted(_finite(values))
    if not data:
        return math.nan
    pos = q * (len(data) - 1)
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """Median of the finite samples (NaN if none)."""
    return quantile(values, 0.5)


def summarize(values: Sequence[float]) -> Summary:
    """Median, min, max and quartiles of the finite samples.

    Args:
        values: Samples.

    Returns:
        A :class:`Summary` (NaN figures and ``n = 0`` when no finite sample).
    """
    data = _finite(values)
    return Summary(n=len(data), median=quantile(data, 0.5), minimum=quantile(data, 0.0),
                   maximum=quantile(data, 1.0), q1=quantile(data, 0.25), q3=quantile(data, 0.75),
                   samples=[float(v) for v in values])


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """``median(numerator) / median(denominator)`` (NaN if either is NaN or the divisor is 0)."""
    top, bottom = median(numerator), median(denominator)
    if not math.isfinite(top) or not math.isfinite(bottom) or bottom == 0:
        return math.nan
    return top / bottom


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Per-round ratios ``numerator[i] / denominator[i]`` of interleaved repeats.

    Args:
        numerator: Samples of variant A, one per round.
        denominator: Samples of variant B, one per round (same rounds).

    Returns:
        One ratio per round (NaN where a sample is missing or the divisor is 0).

    Raises:
        ValueError: The two lists differ in length.
    """
    if len(numerator) != len(denominator):
        raise ValueError(f"paired samples need equal lengths, got {len(numerator)} and "
                         f"{len(denominator)}")
    out = []
    for a, b in zip(numerator, denominator):
        a, b = float(a), float(b)
        out.append(a / b if math.isfinite(a) and math.isfinite(b) and b != 0 else math.nan)
    return out


def efficiency(throughput_n: float, throughput_1: float, n: int) -> float:
    """Scaling efficiency ``throughput_n / (n * throughput_1)`` (:func:`course_lib.training.stats.scaling_efficiency`).

    Args:
        throughput_n: Throughput with ``n`` workers (all workers together).
        throughput_1: Throughput of the baseline (one worker).
        n: Number of workers (or, against a ceiling, 1).

    Returns:
        The efficiency (1.0 = perfect); NaN if the baseline is 0 or NaN.

    Raises:
        ValueError: ``n < 1``.
    """
    return scaling_efficiency(throughput_n, throughput_1, n)[0]


def overhead_pct(time_with: float, time_without: float) -> float:
    """Relative cost of an addition, in percent: ``100 * (time_with / time_without - 1)``."""
    if not math.isfinite(time_without) or time_without == 0 or not math.isfinite(time_with):
        return math.nan
    return 100.0 * (time_with / time_without - 1.0)


def interleaved_schedule(variants: Sequence[str], repeats: int) -> list[tuple[int, str]]:
    """The order of the runs: round 0 runs every variant once, then round 1, ....

    Args:
        variants: Variant names, in the order they run within a round.
        repeats: Number of rounds.

    Returns:
        ``[(round, variant), ...]``, e.g. A, B, C, A, B, C for 2 rounds of 3 variants.

    Raises:
        BenchOptionError: ``repeats < 1``, no variants, or duplicate names.
    """
    check_repeats(repeats)
    if not variants:
        raise BenchOptionError("no variants to run")
    if len(set(variants)) != len(variants):
        raise BenchOptionError(f"duplicate variant names in {list(variants)}")
    return [(r, v) for r in range(repeats) for v in variants]


def goal_met(value: float, op: str, target: float) -> bool | None:
    """Whether ``value op target`` holds (``op`` is ``">="`` or ``"<="``); None for NaN."""
    if op not in (">=", "<="):
        raise ValueError(f"op must be '>=' or '<=', got {op!r}")
    if not math.isfinite(value):
        return None
    return value >= target if op == ">=" else value <= target


MET, NOT_MET, NOT_RESOLVED = "met", "NOT met", "not resolved"


def goal_verdict(value: float, spread: tuple[float, float] | None, op: str, target: float, *,
                 floor: float | None = None, margin: float | None = None) -> str:
    """Whether a goal is met *and resolved* by the spread of the measurement.

    ``met`` needs the median on the right side of ``target`` and the whole spread (min–max of
    the samples or of the per-round ratios) too: for ``">="`` min >= ``floor`` (default
    ``target``), for ``"<="`` max <= ``target``; with ``margin``, also the spread within
    ``[-margin, +margin]`` (an overhead whose rounds read -50 % .. +98 % resolves nothing).
    ``NOT met`` needs the median on the wrong side and the spread not reaching the target
    (for ``">="`` max < target, for ``"<="`` min > target). Anything else: ``not resolved``.
    Each side is the course's one decision rule, :func:`course_lib.training.stats.interval_verdict`,
    with the spread as the interval (turned round for ``"<="``).

    Args:
        value: The headline figure (median or ratio of medians), in the goal's unit.
        spread: ``(min, max)``; None for a single measurement (judged by ``value`` alone).
        op: ``">="`` or ``"<="``.
        target: The goal.
        floor: ``">="`` only: the lowest acceptable round (e.g. median >= 97 %, every round
            >= 93 %).
        margin: Largest acceptable distance of any round from zero (overheads).

    Returns:
        ``"met"``, ``"NOT met"``, ``"not resolved"``, or ``""`` when not measured.

    Raises:
        ValueError: ``op`` is not ``">="`` / ``"<="``.
    """
    if op not in (">=", "<="):
        raise ValueError(f"op must be '>=' or '<=', got {op!r}")
    if not math.isfinite(value):
        return ""
    eps = 1e-9 * max(1.0, abs(target))  # 100 * (10.1 / 10 - 1) is 1.0000000000000009
    sign = 1.0 if op == ">=" else -1.0

    def side(low: float, high: float, level: float) -> bool | None:
        """The interval against ``level`` in the goal's direction (True: on the goal's side)."""
        ends = (low, high) if op == ">=" else (-high, -low)
        return interval_verdict(*ends, sign * level - eps, inclusive=True)

    good = side(value, value, target) is True
    if spread is None:
        return MET if good else NOT_MET
    lo, hi = spread
    resolved_good = side(lo, hi, target if floor is None or op != ">=" else floor) is True
    resolved_bad = side(lo, hi, target) is False
    if margin is not None:  # the spread within [-margin, +margin]: at least -margin, at most +margin
        inside = (interval_verdict(lo, hi, -margin - eps, inclusive=True) is True
                  and interval_verdict(-hi, -lo, -margin - eps, inclusive=True) is True)
        resolved_good = resolved_good and inside
    if good and resolved_good:
        return MET
    if not good and resolved_bad:
        return NOT_MET
    return NOT_RESOLVED


def check_repeats(repeats: object) -> int:
    """Return ``repeats`` if it is an int >= 1, else raise :class:`BenchOptionError`."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise BenchOptionError(f"--repeats must be an integer >= 1 (5 or more for the medians to "
                               f"mean anything), got {repeats!r}")
    return repeats


def parse_only(text: str, known: Sequence[str]) -> list[str]:
    """Parse ``--only`` (e.g. ``"1,4,5"``) into section ids, in the order of ``known``.

    Args:
        text: Comma-separated section ids; spaces are ignored.
        known: All section ids, in run order.

    Returns:
        The chosen ids, deduplicated, in the order of ``known``.

    Raises:
        BenchOptionError: Empty selection or an unknown id (the message lists the valid ones).
    """
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise BenchOptionError(f"--only needs at least one section, e.g. --only 1,4; valid: "
                               f"{', '.join(known)}")
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise BenchOptionError(f"--only: unknown section(s) {', '.join(unknown)}; valid sections "
                               f"are {', '.join(known)}")
    return [k for k in known if k in parts]


def fmt(value: float | None, digits: int = 0, *, unit: str = "") -> str:
    """Format a number with thin grouping (``12 345``) and a unit; ``n/a`` for None/NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if unit == "%":
        return f"{value:.{digits}f} %"
    text = f"{value:,.{digits}f}".replace(",", " ")
    return f"{text} {unit}".rstrip() if unit else text


@dataclass
class Row:
    """One line of the results table.

    Attributes:
        section: Section id (``"1"`` .. ``"8"``).
        measurement: What was measured.
        value: The headline figure (a median or a ratio of medians); NaN if not measured.
        spread: ``(low, high)`` of that figure (min–max of samples or of per-round ratios).
        unit: ``"img/s"``, ``"x"``, ``"%"``, ``"s"`` ....
        n: Samples behind the figure.
        goal: Goal text, e.g. ``">= 95 %"``; empty if none.
        met: Whether the goal was met (None: no goal, not measured, or not resolved).
        verdict: ``"met"`` / ``"NOT met"`` / ``"not resolved"`` (:func:`goal_verdict`);
            empty: the goal column falls back to ``met``.
        note: Anything the reader must know (skipped, measured under load, ...).
        digits: Decimals shown.
    """

    section: str
    measurement: str
    value: float = math.nan
    spread: tuple[float, float] | None = None
    unit: str = ""
    n: int = 0
    goal: str = ""
    met: bool | None = None
    note: str = ""
    digits: int = 0
    verdict: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        out = asdict(self)
        out["spread"] = None if self.spread is None else [json_safe(float(s)) for s in self.spread]
        out["value"] = json_safe(float(self.value))
        return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(rows: Sequence[Row]) -> str:
    """Render rows as a Markdown table.

    Columns: ``#`` | Measurement | Median | Spread (min–max) | n | Goal | Note. A ratio's value
    in percent is shown as ``97.1 %``; the goal column says ``met`` / ``NOT met``.

    Args:
        rows: The rows, in order.

    Returns:
        The Markdown text (header, separator, one line per row), ending with a newline.
    """
    lines = ["| # | Measurement | Median | Spread (min–max) | n | Goal | Note |",
             "|---|---|---:|---|---:|---|---|"]
    for row in rows:
        if row.n == 0 or not math.isfinite(row.value):
            value, spread = "n/a", "—"
        else:
            value = fmt(row.value, row.digits, unit=row.unit)
            spread = "—" if row.spread is None else (
                f"{fmt(row.spread[0], row.digits)}–{fmt(row.spread[1], row.digits, unit=row.unit)}")
        goal = row.goal
        if row.goal and row.verdict:
            goal = f"{row.goal}: {row.verdict}"
        elif row.goal and row.met is not None:
            goal = f"{row.goal}: {'met' if row.met else 'NOT met'}"
        lines.append(f"| {row.section} | {_cell(row.measurement)} | {value} | {spread} | {row.n} | "
                     f"{_cell(goal)} | {_cell(row.note)} |")
    return "\n".join(lines) + "\n"
