"""What a throughput measurement records and reports: each epoch's counts and rate, and the run's summary.

:class:`course_lib.training.throughput.ThroughputMeter` times the steps; this module holds what it keeps and hands
back: an :class:`EpochRecord` per epoch (its steps, samples and seconds, all and counted, and the rate they give), a
:class:`ThroughputSummary` over the counted epochs and, for each of them, an :class:`EpochRate` (what notebook 01's
batch-size sweep judges with :func:`course_lib.training.throughput.below_peak_cpu`).

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from course_lib.training.events import json_safe

__all__ = ["EpochRecord", "ThroughputSummary", "EpochRate"]


@dataclass
class ThroughputSummary:
    """Throughput over the counted (post-warm-up) epochs.

    Attributes:
        images_per_sec_mean: Mean global images/s over the counted epochs.
        ci95: Half-width of the 95 % confidence interval of that mean (NaN if < 2 epochs).
        per_worker_images_per_sec: ``images_per_sec_mean / workers``.
        step_time_ms_mean: Mean time per counted step, in ms.
        epochs_counted: Number of epochs in the mean.
        per_epoch: Global images/s of each counted epoch.
        samples_total: Samples actually processed in the counted steps, all workers.
        includes_warmup: True when every epoch was warm-up, so the warm-up epochs were used
            rather than reporting nothing.
        cpu_per_wall: CPU seconds / wall seconds of each epoch of ``per_epoch`` (NaN when not
            measured): about the number of cores the epoch kept busy.
        disturbed_epochs: 1-based numbers of the epochs of ``per_epoch`` judged disturbed.
        excluded_epochs: How many of those were left out of the mean (``exclude_disturbed``;
            none when every epoch was disturbed: then the mean is over all of them, suspect).
    """

    images_per_sec_mean: float
    ci95: float
    per_worker_images_per_sec: float
    step_time_ms_mean: float
    epochs_counted: int
    per_epoch: list[float] = field(default_factory=list)
    samples_total: int = 0
    includes_warmup: bool = False
    cpu_per_wall: list[float] = field(default_factory=list)
    disturbed_epochs: list[int] = field(default_factory=list)
    excluded_epochs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN becomes None)."""
        return json_safe(asdict(self))


@dataclass(frozen=True)
class EpochRate:
    """One counted epoch as :meth:`ThroughputMeter.counted_epochs` reports it.

    Attributes:
        images_per_sec: Global images/s of the epoch.
        step_time_ms: Time per counted step, in ms.
        cpu_per_wall: CPU seconds / wall seconds (NaN when not measured).
        disturbed: The CPU clock judged the epoch disturbed.
    """

    images_per_sec: float
    step_time_ms: float
    cpu_per_wall: float = math.nan
    disturbed: bool = False


@dataclass
class EpochRecord:
    """One epoch as the meter timed it: all its steps, and the counted ones (those after the warm-up steps).

    Attributes:
        epoch: 0-based epoch number (as Keras passes it).
        steps / samples / epoch_time_s: Steps run, samples they processed (all workers) and their seconds.
        counted_steps / counted_samples / counted_time_s: The same after the first ``warmup_steps``.
        warmup: A warm-up epoch (left out of the summary).
        cpu: The CPU clock's window of the epoch (``CpuWindow.to_dict()``), None when not measured.
    """

    epoch: int
    steps: int
    samples: int
    epoch_time_s: float
    counted_steps: int
    counted_samples: int
    counted_time_s: float
    warmup: bool
    cpu: dict[str, Any] | None = None

    @property
    def rate(self) -> float:
        """Global images/s of the counted steps (NaN when they took no time)."""
        return self.counted_samples / self.counted_time_s if self.counted_time_s > 0 else math.nan

    @property
    def step_ms(self) -> float:
        """Milliseconds per counted step (NaN without counted steps)."""
        if self.counted_steps == 0 or self.counted_time_s <= 0:
            return math.nan
        return 1000.0 * self.counted_time_s / self.counted_steps

    @property
    def disturbed(self) -> bool:
        """The CPU clock judged the epoch disturbed."""
        return bool(self.cpu and self.cpu["disturbed"])
