"""Horovod's knobs measured one at a time: per-step times of a run, medians, "cannot tell".

A run of ``source_code/horovod_fmnist.py --json`` prints one ``epoch`` event per epoch with its
``step_time_ms`` (mean over the epoch's steps); the first epoch (graph tracing, first broadcast)
is marked ``warmup`` and left out. Each remaining epoch is one sample. Two variants are told
apart only when their interquartile ranges do not overlap; otherwise the verdict is
"cannot tell": the difference is inside the run-to-run noise of this machine.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["step_samples", "summarise", "compare", "knob_table"]


def step_samples(epochs: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """Milliseconds per step of every epoch that is not a warm-up epoch.

    Args:
        epochs: The run's ``epoch`` events (``RunResult.epochs``).

    Returns:
        One sample per epoch, in order.

    Raises:
        ValueError: If no epoch after the warm-up carries ``step_time_ms`` (run more epochs, or
            with ``--json``).
    """
    samples = [float(e["step_time_ms"]) for e in epochs
               if not e.get("warmup") and e.get("step_time_ms") is not None]
    if not samples:
        raise ValueError("no timed epoch after the warm-up: run with --json and --epochs >= 2")
    return np.asarray(samples)


def summarise(samples: Sequence[float]) -> dict[str, float]:
    """Median and quartiles (``median``, ``q1``, ``q3``) and the number of samples ``n``."""
    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        raise ValueError("no samples to summarise")
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3), "n": int(values.size)}


def compare(baseline: Sequence[float], variant: Sequence[float]) -> dict[str, Any]:
    """How a variant's step time compares with the baseline's.

    Returns:
        ``ratio`` (median variant / median baseline), ``verdict``: ``"slower"`` or
        ``"faster"`` when the interquartile ranges do not overlap, else ``"cannot tell"``; and
        ``inside_noise`` (the verdict is "cannot tell").
    """
    a, b = summarise(baseline), summarise(variant)
    if b["q1"] > a["q3"]:
        verdict = "slower"
    elif b["q3"] < a["q1"]:
        verdict = "faster"
    else:
        verdict = "cannot tell"
    return {"ratio": b["median"] / a["median"], "verdict": verdict,
            "inside_noise": verdict == "cannot tell"}


def knob_table(samples: Mapping[str, Sequence[float]], baseline: str) -> "pandas.DataFrame":
    """One row per variant: median ms/step, IQR, ratio to the baseline and the verdict.

    Args:
        samples: ``{label: per-epoch ms/step}``, the baseline among them.
        baseline: The label of the baseline.

    Raises:
        KeyError: If ``baseline`` is not a key of ``samples``.
    """
    import pandas as pd

    if baseline not in samples:
        raise KeyError(f"baseline {baseline!r} is not one of {sorted(samples)}")
    rows = []
    for label, values in samples.items():
        s = summarise(values)
        c = compare(samples[baseline], values)
        rows.append({"variant": label, "ms_per_step": s["median"], "q1": s["q1"], "q3": s["q3"],
                     "epochs": s["n"], "vs_baseline": c["ratio"],
                     "verdict": "baseline" if label == baseline else c["verdict"]})
    return pd.DataFrame(rows)
