"""Epoch arithmetic: what one epoch means when W workers share the training set.

One epoch is one pass over the training set by all workers together (never "each worker sees
everything"). :class:`EpochPlan` is the one value that holds it, in one batch vocabulary:

* **per-worker batch** ``b``: images one worker (a Horovod process, a MultiWorkerMirrored worker, a
  MirroredStrategy replica) takes in one step;
* **step batch** ``b·W``: images one step processes on all workers together (what a throughput
  meter counts, :class:`course_lib.training.throughput.ThroughputMeter`);
* **global batch** ``b·W·k``: images behind one optimizer update (``k`` = gradient accumulation;
  without accumulation it equals the step batch);
* **steps per epoch**: training steps every worker runs; **samples per epoch**: images processed by
  all workers in one epoch (padded shards count their copies); **updates per epoch**: ``steps // k``.

Every name here is one of the plan's: ``train_size`` N, ``per_worker_batch`` b, ``workers`` W,
``backward_passes_per_step`` k. :func:`shard_size`, :func:`steps_per_epoch` and :func:`samples_per_epoch` are the
plan's arithmetic for a caller that holds no plan: the input pipelines (:mod:`course_lib.training.pipeline`)
shard with them, and notebooks 02 and 03 count steps with them. The scripts print :meth:`EpochPlan.describe` at
start and send :meth:`EpochPlan.as_dict` in their ``config`` event (:mod:`course_lib.training.report`), so the
learner can check the numbers by hand; :func:`epoch_arithmetic` is that dict for notebook 04's cell and the
exercises' solvers (``course_lib.lessons.common.answers``).

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ShardError", "shard_size", "steps_per_epoch", "samples_per_epoch", "EpochPlan", "epoch_arithmetic"]


class ShardError(ValueError):
    """Invalid epoch or sharding arguments (a count below 1, a worker index outside the workers)."""


def check_counts(**counts: int) -> None:
    """Raise :class:`ShardError` unless every count (named as the plan names it) is an int >= 1."""
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ShardError(f"{name} must be an int >= 1, got {value!r}")


def shard_size(train_size: int, workers: int) -> int:
    """Examples per worker per epoch: ``ceil(N / W)`` (training shards are padded)."""
    check_counts(workers=workers)
    return -(-train_size // workers)


def steps_per_epoch(train_size: int, per_worker_batch: int, workers: int = 1) -> int:
    """Training steps per epoch on every worker: ``ceil(shard_size(N, W) / b)``.

    Equals ``ceil(N / (b * W))`` (rounding up twice is rounding up once).
    """
    check_counts(workers=workers, per_worker_batch=per_worker_batch)
    return -(-shard_size(train_size, workers) // per_worker_batch)


def samples_per_epoch(train_size: int, workers: int = 1) -> int:
    """Examples actually processed per epoch by all workers: ``shard_size(N, W) * W``."""
    return shard_size(train_size, workers) * workers


@dataclass(frozen=True)
class EpochPlan:
    """One epoch of one run, in the batch vocabulary of this module.

    Attributes:
        train_size: Training examples N.
        per_worker_batch: Batch of one worker (or replica) per step, b.
        workers: Horovod processes, MultiWorkerMirrored workers or MirroredStrategy replicas, W.
        backward_passes_per_step: Gradient accumulation k (steps per update).
        one_reader: MirroredStrategy: one process reads each step batch and splits it over the
            replicas, so nothing is sharded or padded (a shard is the whole set).

    Raises:
        ShardError: A count below 1.
    """

    train_size: int
    per_worker_batch: int
    workers: int = 1
    backward_passes_per_step: int = 1
    one_reader: bool = False

    def __post_init__(self) -> None:
        check_counts(train_size=self.train_size, per_worker_batch=self.per_worker_batch, workers=self.workers,
                     backward_passes_per_step=self.backward_passes_per_step)

    @property
    def shard_size(self) -> int:
        """Examples one reader takes per epoch: ``ceil(N / W)`` (N with one reader)."""
        return self.train_size if self.one_reader else shard_size(self.train_size, self.workers)

    @property
    def step_batch(self) -> int:
        """Images per step on all workers: ``b·W``."""
        return self.per_worker_batch * self.workers

    @property
    def global_batch(self) -> int:
        """Images per optimizer update: ``b·W·k``."""
        return self.step_batch * self.backward_passes_per_step

    @property
    def steps_per_epoch(self) -> int:
        """Steps every worker runs per epoch: ``ceil(shard / b)`` (``ceil(N / (b·W))`` with one reader)."""
        if self.one_reader:
            return steps_per_epoch(self.train_size, self.step_batch, 1)
        return steps_per_epoch(self.train_size, self.per_worker_batch, self.workers)

    @property
    def samples_per_epoch(self) -> int:
        """Images processed per epoch by all workers: ``shard·W`` (N with one reader)."""
        return self.train_size if self.one_reader else samples_per_epoch(self.train_size, self.workers)

    @property
    def updates_per_epoch(self) -> int:
        """Optimizer updates per epoch: ``steps // k``."""
        return self.steps_per_epoch // self.backward_passes_per_step

    def as_dict(self) -> dict[str, int]:
        """``shard_size``, ``steps_per_epoch``, ``samples_per_epoch``, ``step_batch``, ``global_batch``,
        ``updates_per_epoch``: the numbers a ``config`` event carries."""
        return {"shard_size": self.shard_size, "steps_per_epoch": self.steps_per_epoch,
                "samples_per_epoch": self.samples_per_epoch, "step_batch": self.step_batch,
                "global_batch": self.global_batch, "updates_per_epoch": self.updates_per_epoch}

    def describe(self) -> str:
        """One paragraph with every number and the formula that gave it (printed at start by rank 0)."""
        n, b, w, k = self.train_size, self.per_worker_batch, self.workers, self.backward_passes_per_step
        if self.one_reader:
            return (
                f"One epoch = one pass over the {n} training images: steps_per_epoch = "
                f"ceil({n}/{self.global_batch}) = {self.steps_per_epoch} steps of "
                f"global batch {b} x {w} replicas = {self.global_batch} "
                f"images; samples_per_epoch = {self.samples_per_epoch}."
            )
        text = (
            f"One epoch = one pass over the {n} training images by all {w} worker(s) "
            f"together: each worker gets ceil({n}/{w}) = {self.shard_size} images "
            f"-> steps_per_epoch = ceil({self.shard_size}/{b}) = "
            f"{self.steps_per_epoch}, each step {b} x {w} = "
            f"{self.step_batch} images; samples_per_epoch = {self.samples_per_epoch}."
        )
        if k > 1:
            text += (
                f" Gradients of {k} steps are accumulated before each update: "
                f"global batch {self.global_batch} images, {self.updates_per_epoch} updates "
                "per epoch (a leftover partial accumulation carries into the next epoch)."
            )
        return text


def epoch_arithmetic(train_size: int, per_worker_batch: int, workers: int,
                     backward_passes_per_step: int = 1) -> dict[str, int]:
    """The numbers of one epoch: :meth:`EpochPlan.as_dict` of these arguments.

    Args:
        train_size: Training examples N.
        per_worker_batch: Batch of one worker (or replica) per step, b.
        workers: Horovod processes or MirroredStrategy replicas, W.
        backward_passes_per_step: Gradient accumulation k (batches per update).

    Returns:
        ``shard_size`` = ceil(N / W); ``steps_per_epoch`` = ceil(shard / b) (training steps every
        worker runs, = ceil(N / (b·W))); ``samples_per_epoch`` = shard·W;
        ``step_batch`` = b·W (images per step); ``global_batch`` = b·W·k (images per optimizer
        update); ``updates_per_epoch`` = steps // k.
    """
    return EpochPlan(train_size, per_worker_batch, workers, backward_passes_per_step).as_dict()

