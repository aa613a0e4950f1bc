"""Honest training throughput: images actually processed per second (TensorFlow-free arithmetic).

:class:`ThroughputMeter` counts the samples that really ran (steps × step batch, capped at the
samples of one epoch when the last batch is partial) and divides by the time those steps took.
Dividing the dataset length by the epoch time instead, while fewer samples ran (steps per epoch
floored), inflates the figure, as the reference course's callback does (OpenHackathons' gpubootcamp
"Introduction to Distributed Deep Learning",
https://github.com/openhackathons-org/gpubootcamp/tree/master/ai/Distributed_Deep_Learning; its
"91 %" scaling efficiency recounts to about 76 % from its own figures). The Keras callback built on it is
:class:`course_lib.training.callbacks.Throughput`.

Every epoch is also timed in CPU seconds (:class:`course_lib.training.cpuclock.CpuClock`): an
epoch in which the process got far fewer cores than it should (other load, or a wait with the
cores idle, like the one in benchmarks/README.md, "The factor-of-two mode") is flagged ``disturbed``
(summary and epoch event) and, with ``exclude_disturbed=True``, left out of the mean;
notebook 01's batch-size sweep re-runs a whole round of its batch sizes when one of its epochs kept far fewer
cores than the run's best (:func:`below_peak_cpu`; course_lib.lessons.data_parallelism.experiments). What the
meter reports, its summary and each counted epoch's rate, is :mod:`course_lib.training.epoch_rates`.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, Callable, Sequence, TextIO

from course_lib.training.cpuclock import CPU_SHARE_LIMIT, CpuClock
from course_lib.training.epoch_rates import EpochRate, EpochRecord, ThroughputSummary
from course_lib.training.events import dumps
from course_lib.training.stats import mean_ci95

__all__ = ["ThroughputMeter", "below_peak_cpu"]


def _own_cpu_s() -> float:
    """User + system CPU seconds of this process (cheap: no scan of other processes)."""
    t = os.times()
    return t.user + t.system


class ThroughputMeter:
    """TensorFlow-free arithmetic of :class:`Throughput` (same constructor and hooks).

    Args:
        step_batch: Samples per step over all workers (per-worker batch × workers,
            ``EpochPlan.step_batch``; with gradient accumulation smaller than the global batch).
        samples_per_epoch: Samples one epoch really processes, all workers
            (``EpochPlan.samples_per_epoch``); caps steps × step batch when the last batch is
            partial. None: no cap.
        warmup_epochs: The first epochs seen by this callback in a ``fit`` are left out of the
            summary (graph tracing, caches filling).
        warmup_steps: The first steps of every epoch are left out of its images/s (unless the
            epoch has no more steps than that; then all count).
        workers: Workers (or replicas) sharing the step batch, for per-worker figures.
        rank: Only rank 0 prints.
        json_lines: Also print one JSON ``epoch`` event per epoch (docs/architecture.md).
        verbose: Print a human line per epoch.
        clock: Monotonic clock in seconds (a fake one in tests).
        stream: Where to print; default ``sys.stdout`` at print time.
        measure_cpu: Time every epoch in CPU seconds too and judge it (``disturbed``); None:
            only with the real clock (a fake clock's epochs have no CPU time to compare).
        expected_cpus: Cores this process should keep busy (default: the CPUs it may run on;
            a Horovod worker pinned to 1 thread: 1).
        exclude_disturbed: Leave disturbed epochs out of the mean (if any other is left).
            Off by default so that the printed epoch count stays the same from run to run.
        cpu_clock: Makes the per-epoch :class:`CpuClock` (injected in tests).
        label: Names the run in the printed line (``epoch 2 (second): ...``) and in the ``epoch``
            event (``"run"``): several models measured side by side in one process.
        keep_across_fits: Keep the epochs across ``fit`` calls (each call trains one epoch, in turn
            with another model, several models measured side by side in one process): the warm-up
            epochs are then the first ones of all the calls. Off: every ``fit`` starts anew.

    Raises:
        ValueError: Non-positive batch/workers, negative warm-up, or ``samples_per_epoch < 1``.
    """

    def __init__(self, step_batch: int, *, samples_per_epoch: int | None = None,
                 warmup_epochs: int = 1, warmup_steps: int = 0, workers: int = 1, rank: int = 0,
                 json_lines: bool = False, verbose: bool = True,
                 clock: Callable[[], float] = time.perf_counter,
                 stream: TextIO | None = None, measure_cpu: bool | None = None,
                 expected_cpus: float | None = None, exclude_disturbed: bool = False,
                 cpu_clock: Callable[[], CpuClock] | None = None, label: str | None = None,
                 keep_across_fits: bool = False) -> None:
        super().__init__()
        spe = 1 if samples_per_epoch is None else samples_per_epoch
        for name, value, low in (("step_batch", step_batch, 1), ("workers", workers, 1),
                                 ("samples_per_epoch", spe, 1), ("warmup_epochs", warmup_epochs, 0),
                                 ("warmup_steps", warmup_steps, 0)):
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        self.step_batch = int(step_batch)
        self.samples_per_epoch = samples_per_epoch
        self.warmup_epochs = int(warmup_epochs)
        self.warmup_steps = int(warmup_steps)
        self.workers = int(workers)
        self.rank = int(rank)
        self.json_lines = json_lines
        self.verbose = verbose
        self.clock = clock
        self.stream = stream
        self.measure_cpu = (clock is time.perf_counter) if measure_cpu is None else measure_cpu
        self.cpu_clock = cpu_clock or (lambda: CpuClock(expected_cpus=expected_cpus,
                                                        cpu_time=_own_cpu_s))
        self.exclude_disturbed = exclude_disturbed
        self.label = label
        self.keep_across_fits = keep_across_fits
        self._cpu: CpuClock | None = None
        self.epochs: list[EpochRecord] = []
        self._reset_epoch()

    # ----------------------------------------------------------------- arithmetic
    def _reset_epoch(self) -> None:
        self._t_begin = math.nan
        self._t_warm = math.nan
        self._t_last = math.nan
        self._steps = 0

    def _samples(self, steps: int) -> int:
        samples = steps * self.step_batch
        if self.samples_per_epoch is not None:
            samples = min(samples, self.samples_per_epoch)
        return samples

    def _close_epoch(self, epoch: int) -> EpochRecord:
        steps = self._steps
        warmup_epoch = len(self.epochs) < self.warmup_epochs
        skip = self.warmup_steps if steps > self.warmup_steps else 0
        start = self._t_warm if skip else self._t_begin
        record = EpochRecord(
            epoch=epoch,
            steps=steps,
            samples=self._samples(steps),
            epoch_time_s=self._t_last - self._t_begin if steps else 0.0,
            counted_steps=steps - skip,
            counted_samples=self._samples(steps) - self._samples(skip),
            counted_time_s=self._t_last - start if steps else 0.0,
            warmup=warmup_epoch,
            cpu=self._cpu.stop().to_dict() if self._cpu is not None else None,
        )
        self._cpu = None
        self.epochs.append(record)
        self._reset_epoch()
        return record

    def _counted(self) -> tuple[list[EpochRecord], bool]:
        """The epochs after warm-up (all epochs, flagged True, if all were warm-up)."""
        counted = [e for e in self.epochs if not e.warmup and e.counted_steps > 0]
        if counted:
            return counted, False
        counted = [e for e in self.epochs if e.counted_steps > 0]
        return counted, bool(counted)

    def counted_epochs(self) -> list[EpochRate]:
        """Each epoch that :meth:`summary` counts, with its CPU/wall and ``disturbed`` verdict.

        Returns:
            One :class:`EpochRate` per counted epoch, in order.
        """
        return [EpochRate(e.rate, e.step_ms,
                          e.cpu["cpu_per_wall"] if e.cpu else math.nan,
                          e.disturbed) for e in self._counted()[0]]

    def summary(self) -> ThroughputSummary:
        """Throughput over the epochs after warm-up (all epochs, flagged, if all were warm-up).

        Returns:
            A :class:`ThroughputSummary` (NaN figures when no epoch ran).
        """
        counted, includes_warmup = self._counted()
        disturbed = [e for e in counted if e.disturbed]
        chosen = counted
        if self.exclude_disturbed:
            chosen = [e for e in counted if e not in disturbed] or counted
        mean, ci = mean_ci95([e.rate for e in chosen])
        steps = sum(e.counted_steps for e in chosen)
        time_s = math.fsum(e.counted_time_s for e in chosen)
        return ThroughputSummary(
            images_per_sec_mean=mean,
            ci95=ci,
            per_worker_images_per_sec=mean / self.workers,
            step_time_ms_mean=1000.0 * time_s / steps if steps else math.nan,
            epochs_counted=len(chosen),
            per_epoch=[e.rate for e in counted],
            samples_total=sum(e.counted_samples for e in chosen),
            includes_warmup=includes_warmup,
            cpu_per_wall=[e.cpu["cpu_per_wall"] if e.cpu else math.nan for e in counted],
            disturbed_epochs=[e.epoch + 1 for e in disturbed],
            excluded_epochs=len(counted) - len(chosen),
        )

    # ----------------------------------------------------------------- Keras hooks
    def on_train_begin(self, logs: dict | None = None) -> None:
        """Start a new measurement (a new ``fit``), unless ``keep_across_fits``."""
        if not self.keep_across_fits:
            self.epochs = []
        self._reset_epoch()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        """Read the clock once at the start of the epoch."""
        self._reset_epoch()
        self._cpu = self.cpu_clock().start() if self.measure_cpu else None
        self._t_begin = self.clock()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        """One clock read per (executed) step; ``batch`` is the 0-based step index."""
        now = self.clock()
        self._t_last = now
        self._steps = batch + 1
        if self._steps == self.warmup_steps:
            self._t_warm = now

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        """Close the epoch, add ``images_per_sec`` and ``step_time_ms`` to ``logs``, print."""
        record = self._close_epoch(epoch)
        rate = record.rate
        step_ms = record.step_ms
        if logs is not None:
            logs["images_per_sec"] = rate
            logs["step_time_ms"] = step_ms
        if self.rank != 0:
            return
        out = self.stream if self.stream is not None else sys.stdout
        if self.verbose:
            note = " (warm-up, not counted)" if record.warmup else ""
            name = f" ({self.label})" if self.label else ""
            # The span the rate divides: with warmup_steps, from the end of the first steps (review 2026-11-28).
            skipped = record.steps - record.counted_steps
            span = f" (from the end of step {skipped})" if skipped else ""
            print(f"epoch {epoch + 1}{name}: {record.counted_samples} images in {record.counted_time_s:.2f} s{span}; "
                  f"{rate:.1f} images/s ({rate / self.workers:.1f} per worker, {self.workers} "
                  f"worker{'s' if self.workers > 1 else ''}), {step_ms:.2f} ms/step{note}",
                  file=out, flush=True)
        if self.json_lines:
            event: dict[str, Any] = {
                "event": "epoch",
                "epoch": epoch + 1,
                "steps": record.steps,
                "samples": record.samples,
                "epoch_time_s": record.epoch_time_s,
                "images_per_sec": rate,
                "per_worker_images_per_sec": rate / self.workers,
                "step_time_ms": step_ms,
                "warmup": record.warmup,
            }
            if self.label:
                event["run"] = self.label
            if record.cpu is not None:
                event.update(cpu_per_wall=record.cpu["cpu_per_wall"],
                             disturbed=record.cpu["disturbed"])
            for key, value in (logs or {}).items():
                event.setdefault(key, value)
            print(dumps(event), file=out, flush=True)


def below_peak_cpu(epochs: Sequence[EpochRate], share: float = CPU_SHARE_LIMIT
                   ) -> Callable[[EpochRate], bool]:
    """A ``disturbed`` test relative to the run itself: CPU/wall below ``share`` × its best epoch's.

    The CPU clock's own verdict assumes the workload fills the machine; a small model on a 16-core
    laptop keeps three cores busy in every epoch and would be "disturbed" throughout. This test
    catches an epoch that lost cores the run's other epochs had (the factor-of-two mode: 1.9 → 0.95).

    Args:
        epochs: The run's epochs (their best ``cpu_per_wall`` is the reference).
        share: Fraction of that best below which an epoch counts as disturbed.

    Returns:
        A predicate ``epoch -> bool`` (True: disturbed); always False when no CPU time was measured.
    """
    peak = max((e.cpu_per_wall for e in epochs if not math.isnan(e.cpu_per_wall)), default=math.nan)
    return lambda e: not math.isnan(peak) and e.cpu_per_wall < share * peak
