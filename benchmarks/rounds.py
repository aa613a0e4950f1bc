"""Interleaved rounds that the CPU clock may disturb: re-run a disturbed round, within a bound.

A *round* runs every variant once (A, B, C). Each measurement comes with the window of
:class:`course_lib.training.cpuclock.CpuClock` (or None where none was recorded). A round is
disturbed when any of its windows is (the machine took the CPU away, cores sat idle while the
workload should have filled them, or the workload got far less CPU than its threads). Such a
round is discarded and run again, up to ``max_extra`` extra rounds in all; if the bound is hit,
the disturbed rounds are kept (clean rounds first) so that the section still reports, and the
count says so.

Plain Python, tested in tests/test_benchmarks.py with fake rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Measurement", "RoundsResult", "collect_rounds", "round_disturbed"]

#: One measurement: (figure, CPU-clock window as a dict, or None).
Measurement = tuple[float, "Mapping[str, Any] | None"]


@dataclass
class RoundsResult:
    """What :func:`collect_rounds` kept and what it saw.

    Attributes:
        samples: ``{variant: [figure per kept round]}``, kept rounds in the order run.
        cpu: ``{variant: [window per kept round]}``.
        attempts: Rounds run. disturbed: Rounds judged disturbed.
        kept_disturbed: Disturbed rounds kept because the re-run bound was reached.
        log: Every round run: ``{"round": i, "disturbed": bool, "reasons": [...]}``.
    """

    samples: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[Any]] = field(default_factory=dict)
    attempts: int = 0
    disturbed: int = 0
    kept_disturbed: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)

    def info(self) -> dict[str, int]:
        """The counts for :func:`benchmarks.report.disturbance_row`."""
        kept = len(next(iter(self.samples.values()), []))
        return {"rounds": kept, "attempts": self.attempts, "disturbed": self.disturbed,
                "kept_disturbed": self.kept_disturbed}


def round_disturbed(results: Mapping[str, Measurement]) -> list[str]:
    """The reasons a round is disturbed (empty: clean), as ``"variant: reason"``."""
    reasons = []
    for name, (_, window) in results.items():
        if window and window.get("disturbed"):
            reasons += [f"{name}: {r}" for r in window.get("reasons", [])] or [f"{name}: disturbed"]
    return reasons


def collect_rounds(run_round: Callable[[int], Mapping[str, Measurement]], repeats: int, *,
                   max_extra: int | None = None,
                   printer: Callable[[str], None] = print) -> RoundsResult:
    """Run rounds until ``repeats`` clean ones, re-running disturbed ones within a bound.

    Args:
        run_round: Runs round ``i`` (0-based count of rounds run so far) and returns
            ``{variant: (figure, window)}``.
        repeats: Clean rounds wanted.
        max_extra: Extra rounds allowed in all (default ``repeats``: at most twice the work).
        printer: Where to say that a round was disturbed.

    Returns:
        A :class:`RoundsResult`.

    Raises:
        ValueError: ``repeats < 1`` or ``max_extra < 0``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    extra = repeats if max_extra is None else max_extra
    if extra < 0:
        raise ValueError(f"max_extra must be >= 0, got {extra}")
    clean: list[Mapping[str, Measurement]] = []
    dirty: list[Mapping[str, Measurement]] = []
    result = RoundsResult()
    while len(clean) < repeats and result.attempts < repeats + extra:
        measured = run_round(result.attempts)
        reasons = round_disturbed(measured)
        result.log.append({"round": result.attempts, "disturbed": bool(reasons),
                           "reasons": reasons})
        result.attempts += 1
        if reasons:
            result.disturbed += 1
            dirty.append(measured)
            printer(f"round disturbed, will re-run if the bound allows: {'; '.join(reasons)}")
        else:
            clean.append(measured)
    kept = clean + dirty[:repeats - len(clean)]
    result.kept_disturbed = len(kept) - len(clean)
    for measured in kept:
        for name, (value, window) in measured.items():
            result.samples.setdefault(name, []).append(float(value))
            result.cpu.setdefault(name, []).append(None if window is None else dict(window))
    return result
