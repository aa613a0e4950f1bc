"""Epoch arithmetic: what one epoch means when W workers share the training set.

One epoch is one pass over the training set by all workers together (never "each worker sees
everything"). The scripts print :func:`describe_epoch` at start and send :func:`epoch_arithmetic`
as their ``config`` event, so the learner can check the numbers by hand.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

from course_lib.training import pipeline

__all__ = ["epoch_arithmetic", "describe_epoch"]


def epoch_arithmetic(train_size: int, per_worker_batch: int, workers: int,
                     backward_passes_per_step: int = 1) -> dict[str, int]:
    """The numbers of one epoch.

    Args:
        train_size: Training examples N.
        per_worker_batch: Batch of one worker (or replica) per step, b.
        workers: Horovod processes or MirroredStrategy replicas, W.
        backward_passes_per_step: Gradient accumulation k (batches per update).

    Returns:
        ``shard_size`` = ceil(N / W); ``steps_per_epoch`` = ceil(shard / b) (training steps every
        worker runs, = ceil(N / (b·W)) when W divides N); ``samples_per_epoch`` = shard·W;
        ``step_batch`` = b·W (images per step); ``global_batch`` = b·W·k (images per optimizer
        update); ``updates_per_epoch`` = steps // k.
    """
    shard = pipeline.shard_size(train_size, workers)
    steps = pipeline.steps_per_epoch(train_size, per_worker_batch, workers)
    return {
        "shard_size": shard,
        "steps_per_epoch": steps,
        "samples_per_epoch": pipeline.samples_per_epoch(train_size, workers),
        "step_batch": per_worker_batch * workers,
        "global_batch": per_worker_batch * workers * backward_passes_per_step,
        "updates_per_epoch": steps // backward_passes_per_step,
    }


def describe_epoch(arith: dict[str, int], train_size: int, per_worker_batch: int, workers: int,
                   backward_passes_per_step: int = 1, unit: str = "worker") -> str:
    """Human-readable version of :func:`epoch_arithmetic` (printed at start by rank 0).

    Args:
        arith: The result of :func:`epoch_arithmetic` for the same arguments.
        train_size, per_worker_batch, workers, backward_passes_per_step: As there.
        unit: ``"worker"`` (Horovod: one process per worker, each reading its shard), or
            ``"replica"`` (MirroredStrategy: one process splits each global batch over the
            replicas; pass the arithmetic of one process whose batch is the global batch,
            ``epoch_arithmetic(N, b * R, 1)``).

    Returns:
        One paragraph with every number and the formula that gave it.
    """
    if unit == "replica":
        return (
            f"One epoch = one pass over the {train_size} training images: steps_per_epoch = "
            f"ceil({train_size}/{arith['global_batch']}) = {arith['steps_per_epoch']} steps of "
            f"global batch {per_worker_batch} x {workers} replicas = {arith['global_batch']} "
            f"images; samples_per_epoch = {arith['samples_per_epoch']}."
        )
    text = (
        f"One epoch = one pass over the {train_size} training images by all {workers} {unit}(s) "
        f"together: each {unit} gets ceil({train_size}/{workers}) = {arith['shard_size']} images "
        f"-> steps_per_epoch = ceil({arith['shard_size']}/{per_worker_batch}) = "
        f"{arith['steps_per_epoch']}, each step {per_worker_batch} x {workers} = "
        f"{arith['step_batch']} images; samples_per_epoch = {arith['samples_per_epoch']}."
    )
    if backward_passes_per_step > 1:
        text += (
            f" Gradients of {backward_passes_per_step} steps are accumulated before each update: "
            f"global batch {arith['global_batch']} images, {arith['updates_per_epoch']} updates "
            "per epoch (a leftover partial accumulation carries into the next epoch)."
        )
    return text
