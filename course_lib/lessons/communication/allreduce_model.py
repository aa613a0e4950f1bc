"""What an all-reduce costs: the alpha-beta model fitted to measured ``hvd.allreduce`` times.

A ring all-reduce of S bytes over N workers sends ``2 (N - 1) / N x S`` bytes over each link
(:func:`course_lib.lessons.common.ring.ring_factor`), and pays a fixed start-up cost per
call. The alpha-beta model says so in one line::

    T(S) = alpha + 2 (N - 1) / N x S / beta

alpha (seconds) is the latency of the whole call at that N: Horovod's cycle wait, its negotiation and its
thread hand-offs, paid once per call, plus the 2 (N - 1) hops of the ring. The probe of
:mod:`course_lib.lessons.communication.transport` measures one hop directly (half a small message's round trip), and
:meth:`AlphaBeta.with_hop` charges exactly that per hop, the rest of alpha once per call, so that a
prediction for another N scales only what was measured to scale (:meth:`AlphaBeta.predict`);
:mod:`course_lib.lessons.communication.alpha_parts` takes the once-per-call rest apart. beta (bytes per second) is the
bandwidth each link sustains. Bandwidths follow NVIDIA's nccl-tests
(doc/PERFORMANCE.md): algorithm bandwidth ``algbw = S / t`` and bus bandwidth
``busbw = algbw x 2 (N - 1) / N`` (comparable across worker counts; it approaches beta);
:func:`misfit_table` says at which sizes the straight line T(S) holds.
The measurements come from ``source_code/allreduce_bench.py`` (its ``allreduce`` JSON lines); the
self-checks of notebook 05's exercises are in :mod:`course_lib.lessons.communication.checks`.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from course_lib.lessons.common.ring import ring_factor

if TYPE_CHECKING:
    import pandas

__all__ = ["AlphaBeta", "algorithm_bandwidth", "bus_bandwidth", "bench_table",
           "fit_alpha_beta", "misfit_table", "plot_fit"]


def algorithm_bandwidth(size_bytes: float, seconds: float) -> float:
    """nccl-tests' algbw in GB/s (10^9 bytes/s): the message size over the time of one call."""
    if seconds <= 0:
        raise ValueError(f"seconds={seconds!r} must be > 0")
    return size_bytes / seconds / 1e9


def bus_bandwidth(algbw: float, workers: int) -> float:
    """nccl-tests' busbw: ``algbw x 2 (N - 1) / N``, the rate each link of the ring carries."""
    return algbw * ring_factor(workers)


@dataclass(frozen=True)
class AlphaBeta:
    """A fitted (or assumed) alpha-beta model of one all-reduce.

    Attributes:
        alpha_s: Latency in seconds: the fixed cost of one call on ``workers`` workers.
        beta_bytes_per_s: Bandwidth of one link in bytes per second.
        workers: Worker count the model was fitted on (its alpha holds 2 (N - 1) ring hops).
        rms_relative_error: Root-mean-square of (measured - model) / measured over the fitted
            points; NaN for an assumed model.
        alpha_call_s: The part of ``alpha_s`` paid once per call whatever N (cycle wait, negotiation,
            dispatch: :meth:`with_hop` sets it from a measured hop); the rest, ``alpha_s - alpha_call_s``,
            is spread over the ring's ``2 (N - 1)`` hops. 0 (the default) treats all of alpha as hops.
    """

    alpha_s: float
    beta_bytes_per_s: float
    workers: int
    rms_relative_error: float = math.nan
    alpha_call_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha_call_s <= self.alpha_s:
            raise ValueError(f"alpha_call_s={self.alpha_call_s!r} must lie between 0 and alpha_s={self.alpha_s!r}: "
                             "the once-per-call part is a part of alpha")

    def with_hop(self, hop_s: float) -> "AlphaBeta":
        """This model with a measured latency per hop: ``2 (N - 1) x hop_s`` of alpha is the ring's, the rest
        is paid once per call.

        Raises:
            ValueError: A negative hop, or hops that would take more than all of alpha.
        """
        hops = 2 * (self.workers - 1) * hop_s
        if hop_s < 0 or hops > self.alpha_s:
            raise ValueError(f"hop_s={hop_s!r}: {2 * (self.workers - 1)} hops of it must fit in alpha_s={self.alpha_s!r}")
        return dataclasses.replace(self, alpha_call_s=self.alpha_s - hops)

    def alpha_per_hop(self) -> float:
        """Seconds each of the ``2 (N - 1)`` ring hops adds: ``(alpha - alpha_call) / (2 (N - 1))``."""
        return (self.alpha_s - self.alpha_call_s) / (2 * (self.workers - 1)) if self.workers > 1 else 0.0

    def predict(self, size_bytes: float | np.ndarray, workers: int | None = None) -> Any:
        """Predicted seconds of one all-reduce of ``size_bytes`` over ``workers`` (default: fit's).

        ``alpha_call + 2 (N - 1) x alpha_per_hop + 2 (N - 1) / N x S / beta``: for another worker
        count the once-per-call part stays, the per-hop part follows the ``2 (N - 1)`` hops and the
        bandwidth term that count's ``2 (N - 1) / N``.
        """
        n = self.workers if workers is None else workers
        size = np.asarray(size_bytes, dtype=float)
        hops = 2 * (n - 1) * self.alpha_per_hop() if self.workers > 1 else self.alpha_s - self.alpha_call_s
        value = self.alpha_call_s + hops + ring_factor(n) * size / self.beta_bytes_per_s
        return float(value) if value.ndim == 0 else value

    def describe(self) -> str:
        """One line: alpha in microseconds, beta in GB/s."""
        return (f"alpha (latency) = {self.alpha_s * 1e6:.1f} us, beta (bandwidth) = "
                f"{self.beta_bytes_per_s / 1e9:.3f} GB/s, fitted on {self.workers} workers")


def bench_table(events: Iterable[Mapping[str, Any]]) -> "pandas.DataFrame":
    """The ``allreduce`` events of ``allreduce_bench.py`` as a table, one row per message size.

    Args:
        events: Event dicts (other events are ignored), e.g. ``[e for _, e in result.events]``.

    Returns:
        Columns ``bytes``, ``median_ms``, ``q1_ms``, ``q3_ms``, ``algbw_gbps``, ``busbw_gbps``,
        ``workers``, ``controller``, ``compression``, ``cycle_ms`` (the run's ``HOROVOD_CYCLE_TIME``, NaN
        when the line does not say; ``allreduce_bench.py --cycle-times`` gives one row per size and cycle
        time), ``dispatch`` (``eager`` or ``function``: ``--dispatch``), sorted by cycle time, dispatch and size.

    Raises:
        ValueError: If there is no ``allreduce`` event (was the script run with ``--json``?).
    """
    import pandas as pd

    rows = [{"bytes": int(e["bytes"]), "median_ms": e["median_s"] * 1e3, "q1_ms": e["q1_s"] * 1e3,
             "q3_ms": e["q3_s"] * 1e3, "algbw_gbps": e["algbw_gbps"], "busbw_gbps": e["busbw_gbps"],
             "workers": int(e["workers"]), "controller": e["controller"],
             "compression": e.get("compression", "none"),
             "cycle_ms": float(e["cycle_time_ms"]) if e.get("cycle_time_ms") is not None else math.nan,
             "dispatch": e.get("dispatch", "eager")}
            for e in events if e.get("event") == "allreduce"]
    if not rows:
        raise ValueError("no 'allreduce' events: run source_code/allreduce_bench.py with --json")
    return pd.DataFrame(rows).sort_values(["cycle_ms", "dispatch", "bytes"], ignore_index=True, kind="stable")


def fit_alpha_beta(sizes_bytes: Sequence[float], seconds: Sequence[float],
                   workers: int) -> AlphaBeta:
    """Fit ``T(S) = alpha + 2 (N - 1) / N x S / beta`` to measured medians.

    The fit minimises *relative* errors (each point weighted by 1 / T), so that the small
    messages, whose times are a thousand times shorter, count as much as the large ones — what
    a log-log plot shows. A negative intercept is clamped to alpha = 0.

    Args:
        sizes_bytes: Message sizes S (bytes), at least two distinct ones.
        seconds: Median time of one all-reduce at each size.
        workers: Number of workers N of the measurement (>= 2).

    Returns:
        The fitted :class:`AlphaBeta`.

    Raises:
        ValueError: Fewer than two distinct sizes, lengths differ, a value is not positive, or
            the times do not grow with the size (no bandwidth can be fitted).
    """
    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if s.shape != t.shape or s.ndim != 1:
        raise ValueError(f"give one time per size: {s.shape} sizes vs {t.shape} times")
    if len(np.unique(s)) < 2:
        raise ValueError("need at least two distinct message sizes to fit alpha and beta")
    if not (np.all(s > 0) and np.all(t > 0) and np.all(np.isfinite(t))):
        raise ValueError("sizes and times must be positive and finite")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 2:
        raise ValueError(f"workers={workers!r}: an all-reduce model needs N >= 2 workers")
    factor = ring_factor(workers)
    design = np.column_stack([np.ones_like(s), factor * s]) / t[:, None]
    (alpha, inv_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:  # latency cannot be negative: refit the slope alone
        alpha = 0.0
        x = factor * s / t
        inv_beta = float(x @ np.ones_like(t) / (x @ x))
    if inv_beta <= 0:
        raise ValueError("the times do not grow with the message size, so no bandwidth can be "
                         "fitted; measure larger messages (e.g. --max-bytes 67108864)")
    model = alpha + factor * s * inv_beta
    rms = float(np.sqrt(np.mean(((t - model) / t) ** 2)))
    return AlphaBeta(float(alpha), float(1.0 / inv_beta), int(workers), rms)


def misfit_table(group: "pandas.DataFrame", fit: AlphaBeta) -> "pandas.DataFrame":
    """Where the fitted line holds: the model against every measured size of one controller.

    Args:
        group: Rows of :func:`bench_table` (one controller, one cycle time).
        fit: The model fitted to them.

    Returns:
        ``bytes``, ``median_ms``, ``model_ms``, ``misfit`` ((measured - model) / measured) and ``inside_iqr``
        (the model lies between the measured quartiles: at that size the line describes the measurement).
    """
    model = np.asarray(fit.predict(group["bytes"].to_numpy(dtype=float))) * 1e3
    out = group[["bytes", "median_ms", "q1_ms", "q3_ms"]].copy()
    out["model_ms"] = model
    out["misfit"] = (out["median_ms"] - model) / out["median_ms"]
    out["inside_iqr"] = (out["q1_ms"] <= model) & (model <= out["q3_ms"])
    return out.drop(columns=["q1_ms", "q3_ms"]).reset_index(drop=True)


def plot_fit(table: "pandas.DataFrame", fits: Mapping[str, AlphaBeta], ax: Any = None) -> Any:
    """Log-log plot of measured all-reduce times (median, IQR bars) and each fitted model.

    Args:
        table: Rows of :func:`bench_table`, possibly of several controllers (one colour each).
        fits: ``{controller: AlphaBeta}``; the model line of each is drawn over its points.
        ax: A matplotlib Axes; a new figure when ``None``.

    Returns:
        The Axes (display its figure; do not return it bare from a cell).
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    sizes = np.geomspace(table["bytes"].min(), table["bytes"].max(), 100)
    for i, (name, group) in enumerate(table.groupby("controller", sort=True)):
        colour = f"C{i}"
        err = [group["median_ms"] - group["q1_ms"], group["q3_ms"] - group["median_ms"]]
        ax.errorbar(group["bytes"], group["median_ms"], yerr=err, fmt="o", color=colour,
                    capsize=3, label=f"{name}: measured (median, IQR)")
        if name in fits:
            fit = fits[name]
            ax.plot(sizes, fit.predict(sizes) * 1e3, "-", color=colour,
                    label=f"{name}: alpha={fit.alpha_s * 1e6:.0f} us, "
                          f"beta={fit.beta_bytes_per_s / 1e9:.2f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("time of one all-reduce (ms)")
    ax.set_title("hvd.allreduce on this machine vs T(S) = alpha + 2(N-1)/N * S / beta")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
