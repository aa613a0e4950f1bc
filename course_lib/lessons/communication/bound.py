"""The reachable bound of a 2-rank all-reduce on this machine, and where Horovod's remainder goes.

A two-rank ring all-reduce of S bytes must, on each rank, exchange S/2 bytes each way at once twice
(reduce-scatter, then all-gather) and add S/2 bytes. With one core per rank, the rank's own core does its send
and receive copies and the add, so these parts cannot overlap: their sum, each measured with both ranks busy,
is the least time any implementation can take here, and S over it the most bus bandwidth it can reach.
``source_code/allreduce_bench.py --bound`` measures the parts on the controller's own transport (TCP loopback
for Gloo, Open MPI's shared memory for MPI) in every round of the sweep, beside the same all-reduce without
Horovod and Horovod's own call, so that every ratio here divides two figures of the same round; the interval
of a ratio is over the rounds (Student's t), its unit the round. A ratio prints as the course prints a distribution
efficiency (``course_lib.lessons.common.efficiency``), as "all-reduce efficiency ≈0.58 ± 0.04 of the bound (95 %,
5 rounds)": bound time over the call's time, 1 at the bound, above 1 only if the bound failed.

Where Horovod's remainder (its time minus the bound) goes, round by round:

* **path**: the all-reduce without Horovod beyond the bound (its algorithm and Python's or MPI's overhead);
* **copy**: Gloo copies the input into the output before its ring, in place (``gloo_operations.cc``): a copy of
  S; MPI's call is out of place, no copy;
* **first touch**: an output in freshly allocated memory faults each of its pages in on first write; the minor
  page faults counted per call say how many pages were fresh, each priced at the copy into fresh memory
  minus the copy into memory touched before, per page;
* **α**: the 4 KiB call of the same round (cycle wait, dispatch, negotiation: section 3);
* **residual**: what is left. It is a residual, not a measured part.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from course_lib.lessons.common.measured import in_words
from course_lib.lessons.communication.transport import Figure
from course_lib.training.stats import ci_verdict

__all__ = ["PAGE_BYTES", "BoundRounds", "bound_rounds", "Remainder"]

#: Bytes of one memory page (Linux x86-64's base page): a fresh 64 MiB output has 16 384 of them.
PAGE_BYTES = 4096


@dataclass(frozen=True)
class Remainder:
    """Horovod's time beyond the bound, and its parts (each a :class:`Figure` over the rounds, seconds)."""

    total: Figure
    path: Figure
    copy: Figure
    first_touch: Figure
    alpha: Figure
    residual: Figure

    def parts(self) -> dict[str, Figure]:
        """The parts that make up :attr:`total`, the residual last."""
        return {"path": self.path, "copy": self.copy, "first touch": self.first_touch, "α": self.alpha,
                "residual": self.residual}


@dataclass(frozen=True)
class BoundRounds:
    """One launch's rounds at S bytes: the bound's parts, the all-reduce without Horovod and Horovod's call.

    Every list holds one value per round (the slower rank's median of the round's calls), in round order.

    Attributes:
        controller: Horovod's controller (``"gloo"`` or ``"mpi"``). transport: The bound's (``"tcp"``/``"mpi"``).
        nbytes: S.
        exchange: One exchange of S/2 bytes each way, both at once. add: The add of S/2 bytes.
        copy: A copy of S bytes into memory touched before. copy_fresh: The same into freshly allocated memory.
        bare: The all-reduce without Horovod. horovod: Horovod's all-reduce. alpha: Horovod's 4 KiB call.
        faults: Minor page faults per Horovod call at S bytes (the larger rank's).
    """

    controller: str
    transport: str
    nbytes: int
    exchange: list[float]
    add: list[float]
    copy: list[float]
    copy_fresh: list[float]
    bare: list[float]
    horovod: list[float]
    alpha: list[float]
    faults: list[float]

    def bound(self) -> list[float]:
        """The bound's time per round: two exchanges of S/2 each way plus the add of S/2."""
        return [2 * x + a for x, a in zip(self.exchange, self.add)]

    def share(self, times: Iterable[float]) -> Figure:
        """``bound / time`` per round, as a Figure: 1 is the bound reached, above 1 the bound beaten."""
        return Figure.of([b / t for b, t in zip(self.bound(), times)])

    def bound_beaten(self) -> bool | None:
        """Did the all-reduce without Horovod beat the bound? True: its share's interval lies above 1 (then the
        "bound" is not one); False: below 1; None: the interval holds 1 (it runs at the bound)."""
        s = self.share(self.bare)
        return ci_verdict(s.seconds, s.half_width_s, 1.0)

    def horovod_below_path(self) -> bool | None:
        """Is Horovod's share of the bound below the all-reduce without Horovod's? Paired round by round."""
        diff = Figure.of([b / x - b / h for b, x, h in zip(self.bound(), self.bare, self.horovod)])
        return ci_verdict(diff.seconds, diff.half_width_s, 0.0)

    def fresh_pages(self) -> list[float]:
        """Share of the output's pages that were fresh per call, per round (faults / pages, at most 1)."""
        pages = self.nbytes / PAGE_BYTES
        return [min(f / pages, 1.0) for f in self.faults]

    def remainder(self) -> Remainder:
        """Horovod's time beyond the bound, split into the parts of the module docstring, round by round."""
        copies = self.controller == "gloo"
        rows = []
        for b, x, h, a, c, fresh, share in zip(self.bound(), self.bare, self.horovod, self.alpha, self.copy,
                                               self.copy_fresh, self.fresh_pages()):
            copy = c if copies else 0.0
            touch = (fresh - c) * share
            rows.append((h - b, x - b, copy, touch, a, h - x - copy - touch - a))
        total, path, copy, touch, alpha, residual = (Figure.of(col) for col in zip(*rows))
        return Remainder(total, path, copy, touch, alpha, residual)

    def lines(self) -> list[str]:
        """The ``measured:`` lines notebook 05 prints: the bound, both shares, and the remainder's parts."""
        bound = Figure.of(self.bound())
        bare, hvd = self.share(self.bare), self.share(self.horovod)
        mib = self.nbytes / 2 ** 20
        rest = self.remainder()
        parts = "; ".join(f"{name} {f.seconds * 1e3:+.1f} ± {f.half_width_s * 1e3:.1f} ms"
                          for name, f in rest.parts().items())
        faults = Figure.of(self.faults)
        return [
            f"measured: {self.controller}: the bound at {mib:.0f} MiB over {self.transport}: 2 exchanges of "
            f"{mib / 2:.0f} MiB each way {2e3 * Figure.of(self.exchange).seconds:.1f} ms + the add of {mib / 2:.0f} MiB "
            f"{1e3 * Figure.of(self.add).seconds:.1f} ms = {bound.seconds * 1e3:.1f} ± {bound.half_width_s * 1e3:.1f} ms",
            f"measured: {self.controller}: without Horovod, all-reduce efficiency {_share(bare)}: "
            + in_words(self.bound_beaten(), "above the bound: the bound failed", "below the bound",
                       "at the bound (its interval holds 1)")
            + f"; Horovod, all-reduce efficiency {_share(hvd)}",
            f"measured: {self.controller}: Horovod's remainder {rest.total.seconds * 1e3:.1f} ± "
            f"{rest.total.half_width_s * 1e3:.1f} ms = {parts}; page faults per call {faults.seconds:.0f} "
            f"({faults.seconds / (self.nbytes / PAGE_BYTES):.2f} of the output's pages)",
        ]


def _share(f: Figure) -> str:
    """A share of the bound in the course's one format: ``≈0.58 ± 0.04 of the bound (95 %, 5 rounds)``."""
    return f"≈{f.seconds:.2f} ± {f.half_width_s:.2f} of the bound (95 %, {f.rounds} rounds)"


def bound_rounds(events: Iterable[Mapping[str, Any]], *, small: int = 4096) -> BoundRounds:
    """:class:`BoundRounds` of one ``allreduce_bench.py --bound --json`` launch (one cycle time, eager calls).

    Args:
        events: The launch's JSON events (its ``bound`` line and its ``allreduce`` lines).
        small: The size whose call is α.

    Raises:
        ValueError: No ``bound`` line (run the benchmark with ``--bound --json``), or rounds of unequal count.
    """
    events = list(events)
    bound = next((e for e in events if e.get("event") == "bound"), None)
    if bound is None:
        raise ValueError("no 'bound' line: run source_code/allreduce_bench.py with --bound --json")
    size = int(bound["bytes"])
    calls = {int(e["bytes"]): e for e in events if e.get("event") == "allreduce" and e.get("dispatch", "eager") == "eager"}
    if size not in calls or small not in calls:
        raise ValueError(f"the launch has no eager all-reduce line at {size} and {small} bytes")
    big = calls[size]
    found = BoundRounds(str(bound["controller"]), str(bound["transport"]), size, list(bound["exchange_s"]),
                        list(bound["add_s"]), list(bound["copy_s"]), list(bound["copy_fresh_s"]),
                        list(bound["bare_s"]), list(big["round_medians_s"]),
                        list(calls[small]["round_medians_s"]), list(big.get("round_minflt") or []))
    lengths = {len(v) for v in (found.exchange, found.add, found.copy, found.copy_fresh, found.bare, found.horovod,
                                found.alpha, found.faults)}
    if len(lengths) != 1 or math.prod(lengths) < 1:
        raise ValueError(f"the bound's rounds and the calls' rounds differ in count: {sorted(lengths)}")
    return found
