"""How alpha grows with a third rank on two cores: the hops it adds, and the run-queue wait it measures.

Notebook 05 launches the all-reduce sweep at 2 and at 3 ranks on a 2-core machine. :func:`alpha_growth` sets the
growth of alpha against what the extra hop of the ring explains, and reads from the ranks' own run-queue delay
(``/proc/<pid>/task/<tid>/schedstat``, reported by ``allreduce_bench.py``) whether waiting for a core grew too,
so the notebook states the three-processes-on-two-cores attribution only as measured.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from course_lib.lessons.common.measured import in_words
from course_lib.lessons.communication.alpha_parts import _rounds, difference
from course_lib.lessons.communication.transport import Figure
from course_lib.training.stats import ci_verdict, interval_verdict

__all__ = ["AlphaGrowth", "alpha_growth"]


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
        cores: The machine's cores (the sentence says how many).
        waited_two, waited_three: Per call, the seconds the slower rank's threads waited for a core (run-queue
            delay from ``/proc/self/task/*/schedstat``, summed over its threads), at 2 and at 3 processes; None
            where not measured (then the sentence attributes nothing to waiting).
    """

    two: Figure
    three: Figure
    hop_s: float
    cores: int | None = None
    waited_two: Figure | None = None
    waited_three: Figure | None = None

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

    @property
    def waited_growth(self) -> Figure | None:
        """The run-queue delay per call at 3 minus at 2 processes (None where not measured)."""
        if self.waited_two is None or self.waited_three is None:
            return None
        return difference(self.waited_three, self.waited_two)

    def waiting_grew(self) -> bool | None:
        """Did waiting for a core grow from 2 to 3 processes? True above 0, False below, None (cannot tell)."""
        w = self.waited_growth
        return None if w is None else ci_verdict(w.seconds, w.half_width_s, 0.0)

    def sentence(self) -> str:
        """The ``measured:`` line that states both alphas and what their difference says, as its verdict decided."""
        g = self.growth
        said = in_words(self.beyond_hops(), "more than the wire adds", "less than even the wire's extra hops",
                        "not told apart from the wire's extra hops (cannot tell)")
        line = (f"measured: α is {self.two.seconds * 1e3:.2f} ± {self.two.half_width_s * 1e3:.2f} ms at 2 "
                f"processes and {self.three.seconds * 1e3:.2f} ± {self.three.half_width_s * 1e3:.2f} ms at 3, "
                f"{g.seconds * 1e3:+.2f} ± {g.half_width_s * 1e3:.2f} ms; a 3-rank ring's 2 extra hops cost "
                f"≈ {self.hops_s * 1e3:.3f} ms on this transport, so the growth is {said}")
        w, before, after = self.waited_growth, self.waited_two, self.waited_three
        if w is None or before is None or after is None:
            return line + "; waiting for a core was not measured"
        cores = f" ({self.cores} cores)" if self.cores else ""
        return (line + f"; run-queue delay per call{cores} {before.seconds * 1e3:.2f} → "
                f"{after.seconds * 1e3:.2f} ms, {w.seconds * 1e3:+.2f} ± {w.half_width_s * 1e3:.2f} ms: "
                + in_words(self.waiting_grew(), "waiting for a core grew", "waiting for a core did not grow",
                           "whether waiting for a core grew: cannot tell"))


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
    runs = {n: [list(events) for events in found] for n, found in launches.items()}
    pooled = {n: Figure.of([v for events in found for v in _rounds(events, cycle_ms, dispatch, nbytes)])
              for n, found in runs.items()}
    waited = {n: [v for events in found for v in _rounds(events, cycle_ms, dispatch, nbytes, "round_runqueue_s")]
              for n, found in runs.items()}
    measured = all(waited.values()) and all(math.isfinite(v) for values in waited.values() for v in values)
    return AlphaGrowth(pooled[2], pooled[3], hop_s, cores, Figure.of(waited[2]) if measured else None,
                       Figure.of(waited[3]) if measured else None)
