"""The transport's limit: what two processes can do without Horovod, read from ``transport_probe.py``.

``source_code/transport_probe.py`` measures, in interleaved rounds, the round trip of a small message and the
bandwidth of a large one over MPI and over TCP loopback, an all-reduce without Horovod on each, and what memory
does to the same bytes (copy, add, first touch). Each of its ``transport`` JSON lines holds one value per round
(the slower rank's). This module turns them into figures with a 95 % interval (the mean over rounds, Student's t:
:func:`course_lib.training.stats.mean_ci95`), and into the budget of a large all-reduce: which part of the path
costs how much per byte at each size (:func:`path_parts`, :func:`per_byte_change`): which stages get slower per
byte from one size to the next (notebook 05, "Where β goes").

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from course_lib.training.stats import ci_verdict, mean_ci95

if TYPE_CHECKING:
    import pandas

__all__ = ["Figure", "ratio", "probe_figures", "probe_table", "Limit", "limit", "PARTS", "path_parts",
           "per_byte_change"]


@dataclass(frozen=True)
class Figure:
    """A measured time: the mean over rounds and the half-width of its 95 % interval, in seconds.

    Attributes:
        seconds: Mean over the rounds.
        half_width_s: Half-width of the 95 % interval (NaN with one round).
        rounds: How many rounds it rests on.
    """

    seconds: float
    half_width_s: float
    rounds: int

    @classmethod
    def of(cls, values: Iterable[float]) -> "Figure":
        """The figure of per-round values (seconds)."""
        data = [float(v) for v in values]
        mean, half = mean_ci95(data)
        return cls(mean, half, len(data))

    def rate_gbps(self, nbytes: float) -> tuple[float, float, float]:
        """``(rate, low, high)`` in GB/s for ``nbytes`` moved in this time (the interval's ends, turned round)."""
        rate = nbytes / self.seconds / 1e9
        slow = self.seconds + (self.half_width_s if math.isfinite(self.half_width_s) else math.nan)
        fast = self.seconds - (self.half_width_s if math.isfinite(self.half_width_s) else math.nan)
        low = nbytes / slow / 1e9 if slow > 0 else math.nan
        high = nbytes / fast / 1e9 if fast > 0 else math.inf
        return rate, low, high


def ratio(a: Figure, b: Figure) -> tuple[float, float]:
    """``a / b`` and the half-width of its 95 % interval (the two relative half-widths in quadrature)."""
    value = a.seconds / b.seconds
    return value, value * math.hypot(a.half_width_s / a.seconds, b.half_width_s / b.seconds)


def probe_figures(events: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, int], Figure]:
    """``{(what, transport, bytes): Figure}`` of every ``transport`` event (other events are ignored).

    Raises:
        ValueError: No ``transport`` event (was the probe run with ``--json``?).
    """
    found = {(e["what"], e["transport"], int(e["bytes"])): Figure.of(e["seconds"])
             for e in events if e.get("event") == "transport"}
    if not found:
        raise ValueError("no 'transport' events: run source_code/transport_probe.py with --json")
    return found


def probe_table(figures: Mapping[tuple[str, str, int], Figure]) -> "pandas.DataFrame":
    """One row per measurement: what, transport, bytes, time (µs) ± half-width, GB/s and its interval."""
    import pandas as pd

    rows = []
    for (what, transport, nbytes), fig in figures.items():
        rate, low, high = fig.rate_gbps(nbytes)
        rows.append({"what": what, "transport": transport, "bytes": nbytes, "rounds": fig.rounds,
                     "time_us": fig.seconds * 1e6, "ci95_us": fig.half_width_s * 1e6,
                     "GB_per_s": rate, "GB_per_s_low": low, "GB_per_s_high": high})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Limit:
    """What one transport can do between the two ranks, without Horovod.

    Attributes:
        transport: ``"tcp"`` (Horovod's Gloo controller uses it) or ``"mpi"``.
        round_trip: Round trip of the small message.
        hop_s: One hop of a ring: half the round trip (what the model charges per hop).
        stream: One large message sent one way (its bandwidth is the single-stream limit).
        stream_bytes: Size of that message.
        allreduce: ``{bytes: Figure}`` of the all-reduce without Horovod on this transport.
    """

    transport: str
    round_trip: Figure
    hop_s: float
    stream: Figure
    stream_bytes: int
    allreduce: dict[int, Figure]

    def stream_gbps(self) -> tuple[float, float, float]:
        """The single-stream bandwidth, ``(rate, low, high)`` in GB/s."""
        return self.stream.rate_gbps(self.stream_bytes)


def limit(figures: Mapping[tuple[str, str, int], Figure], transport: str) -> Limit:
    """The :class:`Limit` of ``transport`` (``"tcp"`` or ``"mpi"``) from :func:`probe_figures`.

    Raises:
        KeyError: The probe did not measure that transport's round trip or stream.
    """
    def one(what: str) -> tuple[int, Figure]:
        found = [(n, f) for (w, t, n), f in figures.items() if w == what and t == transport]
        if not found:
            raise KeyError(f"the probe has no {what!r} measurement over {transport!r}")
        return found[0]

    _, trip = one("round_trip")
    size, stream = one("one_way")
    reduce = {n: f for (w, t, n), f in figures.items() if w == "allreduce" and t == transport}
    return Limit(transport, trip, trip.seconds / 2, stream, size, reduce)


#: The parts of a large all-reduce's path that the probe measures alone: name -> (what, where) of its figures.
PARTS = {"copy": ("copy", "memory"), "add": ("add", "memory"), "first_touch": ("fresh_fill", "memory")}


def path_parts(figures: Mapping[tuple[str, str, int], Figure], horovod: Mapping[int, Figure],
               transport: str) -> dict[str, dict[int, Figure]]:
    """Each part of a large all-reduce's path, measured alone, at each size Horovod was measured at.

    A two-rank all-reduce of S bytes copies S bytes (into its output, or Horovod's buffer), adds S/2 bytes, and
    moves S bytes each way over the transport; a fresh output buffer is touched for the first time.

    Args:
        figures: From :func:`probe_figures`.
        horovod: ``{bytes: Figure}`` of Horovod's all-reduce.
        transport: Whose all-reduce without Horovod to put beside it (``"tcp"`` for Gloo, ``"mpi"`` for MPI).

    Returns:
        ``{part: {bytes: Figure}}`` for ``copy``, ``add``, ``first_touch``, ``without_horovod`` and ``horovod``,
        at the sizes every part was measured at.
    """
    wanted = {**PARTS, "without_horovod": ("allreduce", transport)}
    sizes = [n for n in sorted(horovod) if all((w, t, n) in figures for w, t in wanted.values())]
    parts = {name: {n: figures[(w, t, n)] for n in sizes} for name, (w, t) in wanted.items()}
    parts["horovod"] = {n: horovod[n] for n in sizes}
    return parts


def per_byte_change(parts: Mapping[str, Mapping[int, Figure]], small: int, large: int) -> "pandas.DataFrame":
    """How the cost per byte of each part changes from ``small`` to ``large`` bytes, decided with its interval.

    The ratio is (time per byte at ``large``) / (time per byte at ``small``); its half-width combines the two
    figures' relative half-widths (in quadrature). Above 1 beyond the interval: the part costs more per byte at
    the larger size ("slower per byte": True); below 1 beyond it: False; else "cannot tell" (None).

    Returns:
        One row per part: ``part``, ``ns_per_byte_small``, ``ns_per_byte_large``, ``ratio``, ``ci95``,
        ``slower_per_byte`` (True / False / None).

    Raises:
        KeyError: A part lacks one of the two sizes.
    """
    import pandas as pd  # late: pandas is heavy and only tables need it

    rows = []
    for name, by_size in parts.items():
        if small not in by_size or large not in by_size:
            raise KeyError(f"{name} was not measured at both {small} and {large} bytes")
        a, b = by_size[small], by_size[large]
        ratio = (b.seconds / large) / (a.seconds / small)
        half = ratio * math.hypot(a.half_width_s / a.seconds, b.half_width_s / b.seconds)
        rows.append({"part": name, "ns_per_byte_small": a.seconds / small * 1e9,
                     "ns_per_byte_large": b.seconds / large * 1e9, "ratio": ratio, "ci95": half,
                     "slower_per_byte": ci_verdict(ratio, half, 1.0) if math.isfinite(half) else None})
    return pd.DataFrame(rows)
