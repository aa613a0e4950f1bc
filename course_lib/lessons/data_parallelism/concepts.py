"""Small, exact simulations of the ideas behind data parallelism (no TensorFlow).

- :func:`ring_allreduce` runs the ring algorithm (reduce-scatter, then all-gather) on NumPy arrays,
  one array per simulated worker, and counts what each worker sends: ``2 (N - 1) / N`` × the
  gradient size, whatever N is.
- :func:`allreduce_cost_table` compares that with a parameter server that gathers and sends back
  the full gradient to every worker, counting bytes sent by the busiest node in both, and the
  messages in a row (the latency term: ``2 (N - 1)`` for the ring).
- :func:`synchronous_vs_asynchronous` shows what a straggler costs each scheme.
- :func:`plot_ring_trace` draws the trace of notebook 01's hand-written ring (who sends which chunk
  at each step) as a picture.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from course_lib.lessons.common.ring import ring_factor

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure
    import matplotlib.patches
    import pandas

__all__ = ["AllReduceResult", "ring_allreduce", "allreduce_cost_table", "synchronous_vs_asynchronous",
           "plot_ring_trace"]


@dataclass
class AllReduceResult:
    """What every simulated worker holds after the all-reduce, and what each one sent.

    Attributes:
        results: One array per worker; all equal to the element-wise sum of the inputs.
        elements_sent: Array elements each worker sent over the ring (same for all workers).
        steps: Communication steps (``2 (N - 1)``).
    """

    results: list[np.ndarray]
    elements_sent: list[int]
    steps: int


def ring_allreduce(arrays: Sequence[np.ndarray]) -> AllReduceResult:
    """Sum ``arrays`` across simulated workers with the ring algorithm.

    Each worker's array is cut into N chunks. In N - 1 *reduce-scatter* steps every worker sends
    one chunk to its right neighbour, which adds it to its own; then each worker owns one fully
    reduced chunk. In N - 1 *all-gather* steps the reduced chunks travel once around the ring.

    Args:
        arrays: One 1-D array per worker, all of the same length (at least the number of workers).

    Returns:
        The per-worker results and the number of elements each worker sent.

    Raises:
        ValueError: If there are no arrays, their shapes differ, or they are shorter than N.
    """
    n = len(arrays)
    if n == 0:
        raise ValueError("ring_allreduce needs at least one worker's array")
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"all arrays must be 1-D and of one length, got shapes {sorted(shapes)}")
    if len(arrays[0]) < n:
        raise ValueError(f"arrays of length {len(arrays[0])} cannot be cut into {n} chunks")
    chunks = [np.array_split(np.asarray(a, dtype=np.float64).copy(), n) for a in arrays]
    sent = [0] * n
    # Reduce-scatter: at step s, worker w sends chunk (w - s) mod n to worker w + 1.
    for step in range(n - 1):
        outgoing = [(w, (w - step) % n, chunks[w][(w - step) % n].copy()) for w in range(n)]
        for w, c, payload in outgoing:
            chunks[(w + 1) % n][c] += payload
            sent[w] += payload.size
    # All-gather: worker w now owns the reduced chunk (w + 1) mod n; pass the reduced chunks around.
    for step in range(n - 1):
        outgoing = [(w, (w + 1 - step) % n, chunks[w][(w + 1 - step) % n].copy()) for w in range(n)]
        for w, c, payload in outgoing:
            chunks[(w + 1) % n][c] = payload
            sent[w] += payload.size
    return AllReduceResult([np.concatenate(c) for c in chunks], sent, 2 * (n - 1))


def allreduce_cost_table(gradient_mb: float, workers: Sequence[int] = (1, 2, 4, 8, 16, 32)) -> "pandas.DataFrame":
    """What one all-reduce costs: ring vs a single parameter server, counted the same way.

    Both schemes are counted by what the busiest node **sends** (each node receives as much as
    it sends in both schemes, so counting received bytes too would double both columns alike),
    plus the number of messages in a row that each pays a latency (the term that grows with N
    for the ring: ``T = 2 (N - 1) x alpha + 2 (N - 1) / N x S / beta``; notebook 05 fits alpha
    and beta on this machine).

    Args:
        gradient_mb: Size S of one full gradient in MB (parameters × 4 bytes for float32).
        workers: Worker counts to tabulate.

    Returns:
        A DataFrame with columns ``workers``; ``ring_mb_per_worker`` (2 (N-1)/N × S, sent by each
        worker); ``ring_messages`` (2 (N-1) steps in a row, each a latency);
        ``ps_mb_sent_by_server`` (N × S: the averaged gradient back to every worker; it also
        receives N × S); ``ps_messages_sent_by_server`` (N, one per worker; it also receives N: counted
        as the ring's messages are, sends only); ``ring_limit_mb`` (2 × S).
    """
    import pandas as pd

    rows = [{"workers": n,
             "ring_mb_per_worker": ring_factor(n) * gradient_mb,
             "ring_messages": 2 * (n - 1),
             "ps_mb_sent_by_server": n * gradient_mb if n > 1 else 0.0,
             "ps_messages_sent_by_server": n if n > 1 else 0,
             "ring_limit_mb": 2 * gradient_mb} for n in workers]
    return pd.DataFrame(rows)


def synchronous_vs_asynchronous(compute_times_s: Sequence[float], steps: int = 100) -> "pandas.DataFrame":
    """Steps per second of synchronous and asynchronous data parallelism with uneven workers.

    Synchronous training waits, at every step, for the slowest worker; asynchronous training lets
    each worker apply its gradient when ready, so the fast ones do more steps — with gradients
    computed on weights that others have meanwhile changed (*stale* gradients).

    Args:
        compute_times_s: Seconds one step takes on each worker.
        steps: Steps each worker runs in the synchronous case (sets the time horizon).

    In the steady state a gradient computed in time ``t_i`` on worker i meets
    ``(R - r_i) t_i`` updates of the others (``r_i = 1 / t_i``, ``R`` their sum). Weighted by how
    often each worker sends, the mean is exactly ``N - 1`` whatever the step times (each of the
    other N - 1 workers updates once, on average, while one gradient is computed); the step times
    show up in the *slowest* worker's staleness, which is larger.

    Returns:
        A DataFrame, one row per scheme: updates per second, batches per update, the mean
        staleness of a gradient (updates by others while it was computed) and
        ``max_staleness``, that of the slowest worker's gradients.

    Raises:
        ValueError: If a time is not positive or no workers are given.
    """
    import pandas as pd

    times = [float(t) for t in compute_times_s]
    if not times or min(times) <= 0:
        raise ValueError("give one positive step time per worker")
    horizon = steps * max(times)
    sync_updates = steps
    async_rates = [1.0 / t for t in times]
    async_updates = sum(horizon * r for r in async_rates)
    total_rate = sum(async_rates)
    staleness = sum(r * (total_rate - r) * t for r, t in zip(async_rates, times)) / total_rate
    slowest = (total_rate - 1.0 / max(times)) * max(times)
    return pd.DataFrame([
        {"scheme": "synchronous", "updates_per_s": sync_updates / horizon,
         "batches_per_update": len(times), "mean_staleness": 0.0, "max_staleness": 0.0},
        {"scheme": "asynchronous", "updates_per_s": async_updates / horizon,
         "batches_per_update": 1, "mean_staleness": staleness, "max_staleness": slowest},
    ])


def plot_ring_trace(trace: "pandas.DataFrame") -> "matplotlib.figure.Figure":
    """A picture of a ring all-reduce: one row per worker, one column per step, the chunk it sends.

    Args:
        trace: One row per step with columns ``step``, ``phase`` (``reduce-scatter`` or
            ``all-gather``) and ``worker W sends`` holding ``chunk C`` (notebook 01's
            ``ring_allreduce_by_hand`` returns it).

    Returns:
        A ``matplotlib.figure.Figure`` (show it with ``course_lib.lessons.common.display.show_figure``):
        reduce-scatter steps in one colour, all-gather steps in another, each cell labelled with
        the chunk the worker passes to its right neighbour.

    Raises:
        ValueError: A trace without steps or without ``worker W sends`` columns.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    senders = [c for c in trace.columns if str(c).startswith("worker ") and str(c).endswith(" sends")]
    if len(trace) == 0 or not senders:
        raise ValueError("plot_ring_trace needs a trace with steps and 'worker W sends' columns "
                         "(one worker has nothing to send)")
    colours = {"reduce-scatter": "#9ecae1", "all-gather": "#fdd0a2"}
    fig = Figure(figsize=(1.1 * len(trace) + 2, 0.6 * len(senders) + 1.4), layout="constrained")
    ax = fig.subplots()
    for x, (_, row) in enumerate(trace.iterrows()):
        for y, column in enumerate(senders):
            ax.add_patch(_cell(x, y, colours[str(row["phase"])]))
            ax.text(x + 0.5, y + 0.5, str(row[column]).replace("chunk ", "c"), ha="center", va="center")
    ax.set_xlim(0, len(trace))
    ax.set_ylim(len(senders), 0)
    ax.set_xticks([x + 0.5 for x in range(len(trace))], [str(s) for s in trace["step"]])
    ax.set_yticks([y + 0.5 for y in range(len(senders))], [c.replace(" sends", "") for c in senders])
    ax.set_xlabel("step (each worker sends the chunk shown to the worker below it, the last to the first)")
    ax.legend(handles=[Patch(color=c, label=p) for p, c in colours.items()], loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Ring all-reduce: the chunk each worker sends at each step")
    return fig


def _cell(x: int, y: int, colour: str) -> "matplotlib.patches.Rectangle":
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 1, 1, facecolor=colour, edgecolor="white")
