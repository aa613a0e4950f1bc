"""Notebook 07's concept map: Horovod's knobs in DDP, decided from what the DDP script reports.

DDP's gradient hook counts its all-reduce calls per epoch and each rank reports its optimizer-state bytes; the
verdicts on buckets (:func:`bucket_verdict`), ``no_sync`` (:func:`no_sync_verdict`) and ZeRO (:func:`zero_verdict`)
are decided here from those counts, so each sentence a cell prints comes from the function that decides it.

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["allreduce_calls", "bucket_verdict", "no_sync_verdict", "state_bytes", "zero_verdict"]


def allreduce_calls(run: Any) -> list[int]:
    """All-reduce calls per epoch that rank 0's gradient hook counted (``ddp_fmnist.py``'s ``epoch`` events)."""
    return [int(e["allreduce_calls"]) for e in run.epochs]


def bucket_verdict(calls_default: int, calls_small: int, steps: int) -> str:
    """What ``bucket_cap_mb`` did to one epoch's all-reduce calls (the counts of two runs of ``steps`` steps).

    Returns:
        A sentence: with the default buckets the whole gradient goes in ONE all-reduce per step (or in k), and
        smaller buckets cut it into more, smaller messages (or did not).
    """
    per_step, small_per_step = calls_default / steps, calls_small / steps
    first = (f"default buckets (25 MB): {per_step:g} all-reduce call(s) per step"
             + (": the whole gradient in one message" if per_step == 1 else ""))
    second = (f"bucket_cap_mb=1: {small_per_step:g} per step, the same bytes in more, smaller messages "
              f"(Horovod's fusion threshold, smaller)" if calls_small > calls_default
              else f"bucket_cap_mb=1: {small_per_step:g} per step, no more messages than the default")
    return f"{first}; {second}"


def no_sync_verdict(calls_every: int, calls_no_sync: int, steps: int, passes: int) -> str:
    """Whether ``no_sync`` over ``passes`` backward passes cut the all-reduce calls by that factor (per epoch)."""
    expected = -(-steps // passes) * (calls_every // steps)
    return (f"no_sync over {passes} backward passes: {calls_no_sync} all-reduce calls in an epoch instead of "
            f"{calls_every}; one per {passes} passes as Horovod's backward_passes_per_step={passes}: "
            f"{calls_no_sync == expected}")


def state_bytes(run: Any) -> dict[int, int]:
    """Optimizer-state bytes per rank (``ddp_fmnist.py``'s ``state`` events)."""
    found = {int(rank): int(e["optimizer_state_bytes"]) for rank, e in run.events if e.get("event") == "state"}
    return dict(sorted(found.items()))  # rank order, whichever rank's line came first


def zero_verdict(ddp: Mapping[int, int], zero: Mapping[int, int]) -> list[str]:
    """ZeRO's optimizer-state bytes per rank against DDP's, at the same number of ranks.

    Returns:
        Two sentences: whether the ranks' ZeRO shares add up to one DDP copy (nothing lost, nothing kept twice),
        and whether every rank holds less than a DDP rank, with the largest share's fraction (uneven when one
        parameter tensor is most of the model: ZeroRedundancyOptimizer hands out whole tensors).
    """
    copy = max(ddp.values())
    largest = max(zero.values())
    return [f"ZeRO's shares over {len(zero)} ranks add up to one DDP copy ({copy:,} bytes): "
            f"{sum(zero.values()) == copy}",
            f"every ZeRO rank holds less than a DDP rank: {largest < copy} (the largest share is "
            f"{largest / copy:.0%} of a copy; an even split would be {1 / len(zero):.0%})"]
