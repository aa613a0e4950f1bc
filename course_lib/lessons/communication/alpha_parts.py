"""Where the milliseconds of a small all-reduce go: Horovod's latency alpha, taken apart by experiment.

Each part is measured by changing one thing and keeping the rest (``allreduce_bench.py`` with ``--cycle-times``
and ``--dispatch``, its four configurations interleaved round by round, so that a drift of the machine moves both
sides of a difference alike), plus one launch of Horovod with one rank and the transport probe
(:mod:`course_lib.lessons.communication.transport`):

* **framework dispatch**: ``hvd.allreduce`` called eagerly from Python against the same call inside a
  ``tf.function`` (both at the short cycle);
* **cycle wait**: the course's cycle time against a cycle of 0.1 ms, both inside ``tf.function`` (Horovod's
  background thread looks for ready tensors once per cycle). A timed call here is issued right after a
  synchronising all-reduce, so it waits about one whole cycle; a gradient in training arrives at a random
  moment and waits half of one on average;
* **cycle x dispatch**: the cycle's effect when eager minus its effect inside ``tf.function``, measured, not
  assumed to be 0 (eager dispatch can happen while the thread sleeps out its cycle);
* **Horovod on one rank**: the call inside a ``tf.function`` at the short cycle with no peer at all: the queue,
  Horovod's background thread and the hand-back to TensorFlow;
* **residual**: two ranks against one (both inside ``tf.function``, short cycle) minus the **transport** (the
  same all-reduce without Horovod, measured by the probe): negotiation and Horovod's Gloo calls around the bytes,
  which nothing here measures alone.

The parts' values add up to alpha by construction (they telescope), so their sum checks nothing. The check that
can fail is :func:`additive`: the interaction's interval against a tolerance of 10 % of alpha. Each part keeps its
own interval; alpha has one interval, its own.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from course_lib.lessons.communication.transport import Figure
from course_lib.training.stats import ci_verdict, interval_verdict

if TYPE_CHECKING:
    import pandas

__all__ = ["bench_figures", "paired_difference", "difference", "AlphaParts", "alpha_parts", "ADDITIVE_TOLERANCE",
           "additive", "largest", "majority", "parts_table"]


def bench_figures(events: Iterable[Mapping[str, Any]]) -> dict[tuple[float, str, int], Figure]:
    """``{(cycle ms, dispatch, bytes): Figure}`` of ``allreduce_bench.py``'s ``allreduce`` lines (their rounds).

    Raises:
        ValueError: No ``allreduce`` line carries ``round_medians_s`` (an old script, or no ``--json``).
    """
    found = {(float(e["cycle_time_ms"]), e.get("dispatch", "eager"), int(e["bytes"])): Figure.of(e["round_medians_s"])
             for e in events if e.get("event") == "allreduce" and e.get("round_medians_s")}
    if not found:
        raise ValueError("no 'allreduce' lines with round_medians_s: run source_code/allreduce_bench.py with --json")
    return found


def _rounds(events: Iterable[Mapping[str, Any]], cycle_ms: float, dispatch: str, nbytes: int,
            key: str = "round_medians_s") -> list[float]:
    for e in events:
        if (e.get("event") == "allreduce" and float(e["cycle_time_ms"]) == cycle_ms
                and e.get("dispatch", "eager") == dispatch and int(e["bytes"]) == nbytes):
            return [float(v) for v in e.get(key) or []]
    raise KeyError(f"no allreduce line at cycle {cycle_ms} ms, dispatch {dispatch}, {nbytes} bytes")


def paired_difference(a: Iterable[float], b: Iterable[float]) -> Figure:
    """``a - b`` round by round (both measured in the same rounds), its mean and 95 % interval.

    Raises:
        ValueError: The two lists differ in length.
    """
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"paired rounds need equal lengths, got {len(a)} and {len(b)}")
    return Figure.of([x - y for x, y in zip(a, b)])


def difference(a: Figure, b: Figure) -> Figure:
    """``a - b`` of two figures measured apart (different launches): half-widths added in quadrature."""
    return Figure(a.seconds - b.seconds, math.hypot(a.half_width_s, b.half_width_s), min(a.rounds, b.rounds))


@dataclass(frozen=True)
class AlphaParts:
    """Alpha at the course's setting and its parts (seconds, each a :class:`Figure` with its own interval).

    Attributes:
        alpha: The all-reduce's time at the course's cycle, called eagerly, two ranks (this experiment).
        dispatch: Eager minus ``tf.function`` at the short cycle (paired per round).
        cycle_wait: The course's cycle minus the short one, both inside ``tf.function`` (paired per round).
        interaction: How much the cycle's effect changes with the dispatch: (cycle effect when eager) minus
            (cycle effect inside ``tf.function``), paired per round. 0 if the two parts simply add.
        one_rank: One rank alone, inside ``tf.function``, short cycle.
        between_ranks: Two ranks against one (both inside ``tf.function``, short cycle; different launches).
        residual: ``between_ranks`` minus the transport: negotiation and Horovod's Gloo calls, not measured alone.
        transport: The same all-reduce without Horovod (the probe).
        hop_s: One hop of the ring on this transport (half its round trip), measured by the probe.
    """

    alpha: Figure
    dispatch: Figure
    cycle_wait: Figure
    interaction: Figure
    one_rank: Figure
    between_ranks: Figure
    residual: Figure
    transport: Figure
    hop_s: float

    def parts(self) -> dict[str, Figure]:
        """The six parts, in the order a call meets them; their values add up to alpha by construction."""
        return {"framework dispatch (eager − tf.function)": self.dispatch,
                "cycle wait (course cycle − short, tf.function)": self.cycle_wait,
                "cycle × dispatch (interaction)": self.interaction,
                "Horovod on one rank (queue, thread, hand-back)": self.one_rank,
                "residual: 2 ranks − 1 rank − transport": self.residual,
                "transport (all-reduce without Horovod)": self.transport}


def alpha_parts(two_ranks: Iterable[Mapping[str, Any]], one_rank: Iterable[Mapping[str, Any]], *, transport: Figure,
                hop_s: float, nbytes: int, cycle_ms: float, short_cycle_ms: float) -> AlphaParts:
    """Take alpha apart from the two launches of the experiment and the transport probe.

    The two-rank launch measures all four settings of {course cycle, short cycle} x {eager, tf.function}
    interleaved in every round, so both one-factor effects and their interaction are paired per round.

    Args:
        two_ranks: ``allreduce`` events of the two-rank launch (``--cycle-times cycle_ms,short_cycle_ms
            --dispatch eager,function``).
        one_rank: ``allreduce`` events of the one-rank launch (``short_cycle_ms``, ``function`` at least).
        transport: The same all-reduce without Horovod (:class:`course_lib.lessons.communication.transport.Limit`'s
            ``allreduce[nbytes]``).
        hop_s: One hop of the ring on that transport.
        nbytes: The message size of the experiment (small: alpha is nearly all of its time).
        cycle_ms: The course's cycle time. short_cycle_ms: The short one.

    Raises:
        KeyError: A configuration the experiment should have measured is missing.
    """
    two, one = list(two_ranks), list(one_rank)
    slow_eager = _rounds(two, cycle_ms, "eager", nbytes)
    slow_inside = _rounds(two, cycle_ms, "function", nbytes)
    eager = _rounds(two, short_cycle_ms, "eager", nbytes)
    inside = _rounds(two, short_cycle_ms, "function", nbytes)
    alone = Figure.of(_rounds(one, short_cycle_ms, "function", nbytes))
    between = difference(Figure.of(inside), alone)
    interaction = paired_difference([a - b for a, b in zip(slow_eager, eager)],
                                    [a - b for a, b in zip(slow_inside, inside)])
    return AlphaParts(alpha=Figure.of(slow_eager), dispatch=paired_difference(eager, inside),
                      cycle_wait=paired_difference(slow_inside, inside), interaction=interaction, one_rank=alone,
                      between_ranks=between, residual=difference(between, transport), transport=transport,
                      hop_s=hop_s)


#: How far from 0 the interaction may be, as a share of alpha, for the one-factor parts to count as adding up.
ADDITIVE_TOLERANCE = 0.10


def additive(parts: AlphaParts, tolerance: float = ADDITIVE_TOLERANCE) -> bool | None:
    """Do the one-factor parts add up? Decided on the cycle x dispatch interaction, which nothing forces to 0.

    Returns:
        True when the interaction's whole interval lies within ``± tolerance x alpha`` (the parts add up to that
        precision); False when it lies wholly outside it (they do not add: the cycle's effect depends on the
        dispatch); None (cannot tell) when it reaches across a limit or is unknown.
    """
    i, limit = parts.interaction, tolerance * abs(parts.alpha.seconds)
    if not (math.isfinite(i.half_width_s) and math.isfinite(limit)):
        return None
    low, high = i.seconds - i.half_width_s, i.seconds + i.half_width_s
    if interval_verdict(low, high, -limit) and interval_verdict(low, high, limit) is False:
        return True
    if interval_verdict(low, high, limit) or interval_verdict(low, high, -limit) is False:
        return False
    return None


def largest(parts: AlphaParts) -> tuple[str, bool | None]:
    """The part with the largest value, and whether it is decided: True when its difference from every other
    part has an interval above 0 (half-widths in quadrature), None (cannot tell) otherwise."""
    found = parts.parts()
    top = max(found, key=lambda k: found[k].seconds)
    verdicts = [ci_verdict(found[top].seconds - f.seconds, math.hypot(found[top].half_width_s, f.half_width_s), 0.0)
                for name, f in found.items() if name != top]
    return top, (True if all(v is True for v in verdicts) else None)


def majority(parts: AlphaParts, name: str) -> bool | None:
    """Is the part ``name`` (a key of :meth:`AlphaParts.parts`) more than half of alpha? Decided with the interval
    of ``part - alpha / 2``: True above, False below, None (cannot tell) when it holds 0 or is unknown."""
    part, alpha = parts.parts()[name], parts.alpha
    half = math.hypot(part.half_width_s, alpha.half_width_s / 2)
    if not math.isfinite(half):
        return None
    gap = part.seconds - alpha.seconds / 2
    return interval_verdict(gap - half, gap + half, 0.0)


def parts_table(parts: AlphaParts) -> "pandas.DataFrame":
    """One row per part: ``part``, ``ms``, ``ci95_ms``, ``share`` (of alpha), and alpha last, with its own
    interval (the parts' values add up to it; their intervals are not summed)."""
    import pandas as pd

    alpha = parts.alpha
    rows = [{"part": name, "ms": f.seconds * 1e3, "ci95_ms": f.half_width_s * 1e3,
             "share": f.seconds / alpha.seconds} for name, f in parts.parts().items()]
    rows.append({"part": "α (course cycle, eager, 2 ranks)", "ms": alpha.seconds * 1e3,
                 "ci95_ms": alpha.half_width_s * 1e3, "share": 1.0})
    return pd.DataFrame(rows)
