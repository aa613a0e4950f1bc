"""Where the milliseconds of a small all-reduce go: Horovod's latency alpha, taken apart by experiment.

Each part is measured by changing one thing and keeping the rest (``allreduce_bench.py`` with ``--cycle-times``
and ``--dispatch``, its configurations interleaved round by round, so that a drift of the machine moves both
sides of a difference alike), plus one launch of Horovod with one rank and the transport probe
(:mod:`course_lib.lessons.communication.transport`):

* **cycle wait**: the course's cycle time against a cycle of 0.1 ms (Horovod's background thread looks for
  ready tensors once per cycle);
* **framework dispatch**: ``hvd.allreduce`` called eagerly from Python against the same call inside a
  ``tf.function`` (both at the short cycle);
* **Horovod on one rank**: the call inside a ``tf.function`` at the short cycle with no peer at all: the queue,
  Horovod's background thread and the hand-back to TensorFlow;
* **between the ranks**: two ranks against one (both inside ``tf.function``, short cycle): what a peer adds,
  split into the **transport** (the same all-reduce without Horovod, measured by the probe) and the rest,
  **negotiation** (the ranks agreeing each cycle on what is ready, and Horovod's Gloo calls around the bytes).

The parts add up, by construction, to alpha at the course's setting in this experiment; the check that can fail
is that they add up to the alpha measured in a *separate* launch (the message-size sweep), within the two
measurements' intervals (:func:`sum_check`).

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from course_lib.lessons.common.measured import in_words
from course_lib.lessons.communication.transport import Figure
from course_lib.training.stats import interval_verdict

if TYPE_CHECKING:
    import pandas

__all__ = ["bench_figures", "paired_difference", "difference", "AlphaParts", "alpha_parts", "sum_check",
           "majority", "parts_table", "AlphaGrowth", "alpha_growth"]


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


def _rounds(events: Iterable[Mapping[str, Any]], cycle_ms: float, dispatch: str, nbytes: int) -> list[float]:
    for e in events:
        if (e.get("event") == "allreduce" and float(e["cycle_time_ms"]) == cycle_ms
                and e.get("dispatch", "eager") == dispatch and int(e["bytes"]) == nbytes):
            return [float(v) for v in e["round_medians_s"]]
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
    """Alpha at the course's setting and its parts (seconds, each a :class:`Figure`).

    Attributes:
        alpha: The all-reduce's time at the course's cycle, called eagerly, two ranks (this experiment).
        cycle_wait, dispatch, one_rank, negotiation, transport: The parts (module docstring).
        between_ranks: ``negotiation + transport``: two ranks against one.
        hop_s: One hop of the ring on this transport (half its round trip), measured by the probe.
    """

    alpha: Figure
    cycle_wait: Figure
    dispatch: Figure
    one_rank: Figure
    between_ranks: Figure
    negotiation: Figure
    transport: Figure
    hop_s: float

    def parts(self) -> dict[str, Figure]:
        """The five parts that add up to alpha, in the order a call meets them."""
        return {"framework dispatch (eager vs tf.function)": self.dispatch,
                "cycle wait": self.cycle_wait,
                "Horovod on one rank (queue, its thread, hand-back)": self.one_rank,
                "negotiation and Horovod's calls between the ranks": self.negotiation,
                "transport (the same all-reduce without Horovod)": self.transport}

    def total(self) -> Figure:
        """The sum of the parts, with the half-widths combined in quadrature (parts measured apart)."""
        figures = list(self.parts().values())
        half = math.sqrt(sum(f.half_width_s ** 2 for f in figures))
        return Figure(sum(f.seconds for f in figures), half, min(f.rounds for f in figures))


def alpha_parts(two_ranks: Iterable[Mapping[str, Any]], one_rank: Iterable[Mapping[str, Any]], *, transport: Figure,
                hop_s: float, nbytes: int, cycle_ms: float, short_cycle_ms: float) -> AlphaParts:
    """Take alpha apart from the two launches of the experiment and the transport probe.

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
    at_cycle = _rounds(two, cycle_ms, "eager", nbytes)
    eager = _rounds(two, short_cycle_ms, "eager", nbytes)
    inside = _rounds(two, short_cycle_ms, "function", nbytes)
    alone = Figure.of(_rounds(one, short_cycle_ms, "function", nbytes))
    between = difference(Figure.of(inside), alone)
    return AlphaParts(alpha=Figure.of(at_cycle), cycle_wait=paired_difference(at_cycle, eager),
                      dispatch=paired_difference(eager, inside), one_rank=alone, between_ranks=between,
                      negotiation=difference(between, transport), transport=transport, hop_s=hop_s)


def sum_check(parts: AlphaParts, measured: Figure) -> bool | None:
    """Do the parts add up to alpha measured in another launch? The interval of their difference against 0.

    Returns:
        True when the interval of ``sum - measured`` (half-widths in quadrature) contains 0: the parts account
        for the measured alpha within the noise; False when it lies wholly on one side; None (cannot tell) when
        an interval is unknown.
    """
    total = parts.total()
    gap = total.seconds - measured.seconds
    half = math.hypot(total.half_width_s, measured.half_width_s)
    if not math.isfinite(half):
        return None
    return interval_verdict(gap - half, gap + half, 0.0) is None   # neither wholly above 0 nor wholly below


def majority(parts: AlphaParts, name: str) -> bool | None:
    """Is the part ``name`` (a key of :meth:`AlphaParts.parts`) more than half of alpha? Decided with the interval
    of ``part - sum / 2``: True above, False below, None (cannot tell) when it holds 0 or is unknown."""
    part, total = parts.parts()[name], parts.total()
    half = math.hypot(part.half_width_s, total.half_width_s / 2)
    if not math.isfinite(half):
        return None
    gap = part.seconds - total.seconds / 2
    return interval_verdict(gap - half, gap + half, 0.0)


def parts_table(parts: AlphaParts) -> "pandas.DataFrame":
    """One row per part: ``part``, ``ms``, ``ci95_ms``, ``share`` (of the parts' sum), and the sum last."""
    import pandas as pd

    total = parts.total()
    rows = [{"part": name, "ms": f.seconds * 1e3, "ci95_ms": f.half_width_s * 1e3,
             "share": f.seconds / total.seconds} for name, f in parts.parts().items()]
    rows.append({"part": "sum of the parts", "ms": total.seconds * 1e3, "ci95_ms": total.half_width_s * 1e3,
                 "share": 1.0})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class AlphaGrowth:
    """Alpha at 2 and at 3 processes, and what the ring's extra hops would add (notebook 05, section 3).

    A ring of N ranks makes 2(N-1) hops, so 3 ranks make 2 more than 2; at the transport's measured hop that is
    ``2 * hop_s``. What alpha grows by beyond that is not the wire: on a machine with fewer cores than ranks it is
    mostly the ranks waiting for a core.

    Attributes:
        two: Alpha at 2 processes (every round of every launch pooled).
        three: Alpha at 3 processes.
        hop_s: The transport's measured hop (half its round trip).
        cores: The machine's cores (the sentence says when 3 ranks outnumber them).
    """

    two: Figure
    three: Figure
    hop_s: float
    cores: int | None = None

    @property
    def growth(self) -> Figure:
        """Alpha at 3 minus alpha at 2, half-widths in quadrature (measured in different launches)."""
        return difference(self.three, self.two)

    @property
    def hops_s(self) -> float:
        """What the 2 extra hops of a 3-rank ring cost at the measured hop."""
        return 2 * self.hop_s

    def beyond_hops(self) -> bool | None:
        """Does alpha grow by more than the 2 extra hops? True above, False below, None (cannot tell)."""
        g = self.growth
        return interval_verdict(g.seconds - g.half_width_s, g.seconds + g.half_width_s, self.hops_s)

    def sentence(self) -> str:
        """The ``measured:`` line that states both alphas and what their difference says, as its verdict decided."""
        g = self.growth
        crowded = f" (3 ranks on {self.cores} cores take turns)" if self.cores and self.cores < 3 else ""
        said = in_words(self.beyond_hops(), f"more than the wire adds: the rest is waiting{crowded}",
                        "less than even the wire's extra hops", "cannot tell it from the wire's extra hops")
        return (f"measured: α is {self.two.seconds * 1e3:.2f} ± {self.two.half_width_s * 1e3:.2f} ms at 2 "
                f"processes and {self.three.seconds * 1e3:.2f} ± {self.three.half_width_s * 1e3:.2f} ms at 3, "
                f"{g.seconds * 1e3:+.2f} ± {g.half_width_s * 1e3:.2f} ms; a 3-rank ring's 2 extra hops cost "
                f"≈ {self.hops_s * 1e3:.3f} ms on this transport, so the growth is {said}")


def alpha_growth(launches: Mapping[int, Iterable[Iterable[Mapping[str, Any]]]], *, hop_s: float, cycle_ms: float,
                 dispatch: str, nbytes: int, cores: int | None = None) -> AlphaGrowth:
    """:class:`AlphaGrowth` from ``allreduce_bench.py`` launches at 2 and 3 processes.

    Args:
        launches: ``{2: [events of each 2-process launch], 3: [... of each 3-process launch]}``.
        hop_s: The transport's measured hop.
        cycle_ms, dispatch, nbytes: Which of the launches' figures is alpha.
        cores: The machine's cores (see :class:`AlphaGrowth`).

    Raises:
        ValueError: A process count missing, or launches without that figure.
    """
    if set(launches) != {2, 3}:
        raise ValueError(f"need launches at 2 and 3 processes, got {sorted(launches)}")
    pooled = {n: Figure.of([v for events in runs for v in _rounds(events, cycle_ms, dispatch, nbytes)])
              for n, runs in launches.items()}
    return AlphaGrowth(pooled[2], pooled[3], hop_s, cores)
