"""Input pipelines: per-worker shards for Horovod, distributed batches for MirroredStrategy.

Each epoch's order is a permutation of all examples that depends only on ``(seed, epoch)`` and is
the same on every worker; worker ``r`` of ``W`` takes positions ``r, r + W, ...``. When ``N`` is
not a multiple of ``W`` the permutation is padded with its first ``W - N % W`` entries, so every
worker runs the same number of steps (else Horovod's all-reduce would wait forever) and every
example is seen once per epoch (at most ``W - 1`` of them twice). Training batches keep the last,
partial batch: ``steps_per_epoch = ceil(shard_size / batch_size)``. That arithmetic (and the batch
vocabulary: per-worker, step and global batch) belongs to :mod:`course_lib.training.epochs`; the
names ``ShardError``, ``shard_size``, ``steps_per_epoch`` and ``samples_per_epoch`` are re-exported here.

These names are also available from :mod:`course_lib.training.data`.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from course_lib.training.epochs import (EpochPlan, ShardError, check_counts, samples_per_epoch, shard_size,
                                        steps_per_epoch)

if TYPE_CHECKING:  # pragma: no cover
    import tensorflow as tf

    from course_lib.training.consumption import ConsumedIds

__all__ = [
    "ShardError",
    "shard_size",
    "steps_per_epoch",
    "samples_per_epoch",
    "epoch_indices",
    "shard_padding",
    "make_dataset",
    "make_epochs_dataset",
    "distribute_for_strategy",
]


def check_shard_args(num_workers: int, worker_index: int, batch_size: int | None = None) -> None:
    """Raise :class:`ShardError` unless ``0 <= worker_index < num_workers`` and ``batch_size >= 1``."""
    check_counts(num_workers=num_workers, **({} if batch_size is None else {"batch_size": batch_size}))
    if isinstance(worker_index, bool) or not isinstance(worker_index, int) or not 0 <= worker_index < num_workers:
        raise ShardError(f"worker_index must be in [0, {num_workers}) for num_workers={num_workers}, "
                         f"got {worker_index!r} (pass hvd.rank() and hvd.size())")


def epoch_indices(n: int, *, seed: int, epoch: int, num_workers: int = 1,
                  worker_index: int = 0) -> np.ndarray:
    """Indices a worker trains on during one epoch, in order.

    A global permutation of ``range(n)`` drawn from ``numpy.random.default_rng([seed, epoch])``
    (identical on every worker) is padded with its first ``(W - n % W) % W`` entries, then worker
    ``r`` takes positions ``r, r + W, r + 2W, ...``.

    Args:
        n: Number of examples.
        seed: Seed shared by all workers.
        epoch: Epoch number (0-based).
        num_workers: W.
        worker_index: r.

    Returns:
        int64 array of length ``shard_size(n, W)``.

    Raises:
        ShardError: Invalid worker index or number of workers.
    """
    check_shard_args(num_workers, worker_index)
    perm = np.random.default_rng([int(seed), int(epoch)]).permutation(n)
    pad = (-n) % num_workers
    if pad:
        perm = np.concatenate([perm, perm[:pad]])
    return perm[worker_index::num_workers]


def shard_padding(n: int, num_workers: int = 1, worker_index: int = 0) -> np.ndarray:
    """Which entries of :func:`epoch_indices` are padding (copies added to even out the shards).

    Position ``j`` of worker ``r`` is global position ``r + j * W``; those ``>= n`` are padding.

    Returns:
        bool array of length ``shard_size(n, W)``; ``(W - n % W) % W`` True entries over all workers.
    """
    check_shard_args(num_workers, worker_index)
    return worker_index + np.arange(shard_size(n, num_workers)) * num_workers >= n


def _batches_dataset(images: np.ndarray, labels: np.ndarray, rows: np.ndarray, batch_size: int,
                     cache: bool, *, epochs: np.ndarray | None = None,
                     padding: np.ndarray | None = None,
                     recorder: "ConsumedIds | None" = None) -> "tf.data.Dataset":
    """Dataset of batches gathered from images/labels by each row of index matrix ``rows``.

    Every batch carries its epoch (``epochs[i]`` for row i), the ids and padding flags of its
    examples until the last stage, which hands them to ``recorder`` (when the model pulls the
    batch, after prefetching) and yields ``(images, labels)``.
    """
    import tensorflow as tf

    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim == 3:
        images = images[..., None]
    if images.shape[1:] != (28, 28, 1) or len(images) != len(labels):
        raise ValueError(f"expected images (N, 28, 28[, 1]) and labels (N,), got {images.shape} and "
                         f"{labels.shape}")
    source_images = tf.constant(images)
    source_labels = tf.constant(labels.astype(np.int32))
    epochs = np.zeros(len(rows), np.int64) if epochs is None else np.asarray(epochs, np.int64)
    padding = np.zeros(rows.shape, bool) if padding is None else np.asarray(padding, bool)

    def to_batches(epoch: tf.Tensor, row: tf.Tensor, pad: tf.Tensor) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((row, pad)).batch(batch_size).map(
            lambda idx, flags: (epoch, idx, flags))

    def gather(epoch: tf.Tensor, idx: tf.Tensor, flags: tf.Tensor) -> tuple[tf.Tensor, ...]:
        x = tf.cast(tf.gather(source_images, idx), tf.float32) / 255.0
        return epoch, idx, flags, x, tf.gather(source_labels, idx)

    def note(epoch: tf.Tensor, idx: tf.Tensor, flags: tf.Tensor) -> bool:
        assert recorder is not None
        recorder.record(epoch.numpy(), idx.numpy(), flags.numpy())
        return True

    def record(epoch: tf.Tensor, idx: tf.Tensor, flags: tf.Tensor, x: tf.Tensor,
               y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        if recorder is not None:  # runs in Python each time the model pulls this batch
            done = tf.py_function(note, [epoch, idx, flags], tf.bool)
            with tf.control_dependencies([done]):
                x = tf.identity(x)
        return x, y

    ds = tf.data.Dataset.from_tensor_slices((epochs, rows.astype(np.int64), padding))
    ds = ds.flat_map(to_batches)
    ds = ds.map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if cache:
        ds = ds.cache()
    return ds.prefetch(tf.data.AUTOTUNE).map(record)


def make_dataset(images: np.ndarray, labels: np.ndarray, *, batch_size: int, training: bool,
                 seed: int = 0, num_workers: int = 1, worker_index: int = 0, epoch: int = 0,
                 cache: bool = True) -> "tf.data.Dataset":
    """One epoch of (float32 image in [0, 1] of shape (28, 28, 1), int32 label) batches.

    Semantics:

    * ``training=True``: the order is :func:`epoch_indices` — a global permutation that depends
      only on ``(seed, epoch)``, identical on every worker, padded with its first
      ``(W - N % W) % W`` entries so all shards have the same size (at most W-1 examples are
      seen twice per epoch), then worker r takes positions r, r+W, r+2W, .... Every example is
      seen once per epoch across workers and all workers run the same number of steps
      (otherwise Horovod's allreduce deadlocks).
    * Batches are NOT drop_remainder: ``steps_per_epoch(N, batch_size, W)`` =
      ``ceil(shard_size / batch_size)``, the last batch may be smaller.
    * ``training=False``: no shuffle, no padding; sharded (positions r, r+W, ...) only if
      ``num_workers > 1``.
    * Iterating the dataset again gives the same batches again (the order is fixed by
      ``(seed, epoch)``); for several epochs use :func:`make_epochs_dataset`.

    Args:
        images: uint8 images (N, 28, 28) or (N, 28, 28, 1).
        labels: Integer labels (N,).
        batch_size: Batch size per worker (for MirroredStrategy: the global batch).
        training: Shuffle and pad (True) or keep the order (False).
        seed: Seed shared by all workers.
        num_workers: W, e.g. ``hvd.size()``.
        worker_index: r, e.g. ``hvd.rank()``.
        epoch: Epoch number (0-based) that selects the permutation.
        cache: Cache the converted batches in memory after the first pass.

    Returns:
        A prefetched ``tf.data.Dataset``.

    Raises:
        ShardError: ``num_workers < 1``, ``worker_index`` outside ``[0, num_workers)`` or
            ``batch_size < 1``.
        ValueError: Images/labels of the wrong shape.
    """
    check_shard_args(num_workers, worker_index, batch_size)
    n = len(labels)
    if training:
        rows = epoch_indices(n, seed=seed, epoch=epoch, num_workers=num_workers,
                             worker_index=worker_index)[None, :]
        padding = shard_padding(n, num_workers, worker_index)[None, :]
    else:
        rows = np.arange(n)[worker_index::num_workers][None, :]
        padding = None
    return _batches_dataset(images, labels, rows, batch_size, cache, epochs=np.array([epoch]),
                            padding=padding)


def make_epochs_dataset(images: np.ndarray, labels: np.ndarray, *, batch_size: int, seed: int,
                        num_workers: int, worker_index: int, first_epoch: int,
                        last_epoch: int, recorder: "ConsumedIds | None" = None
                        ) -> "tf.data.Dataset":
    """Training batches of epochs ``first_epoch .. last_epoch - 1``, one epoch after the other.

    Each epoch is exactly ``make_dataset(..., training=True, epoch=e)`` (its own permutation, its
    own partial last batch), so ``model.fit(ds, epochs=last_epoch, initial_epoch=first_epoch,
    steps_per_epoch=steps_per_epoch(N, batch_size, W))`` sees the same batches as an
    uninterrupted run: a resumed run continues exactly.

    Args:
        images: uint8 images (N, 28, 28) or (N, 28, 28, 1).
        labels: Integer labels (N,).
        batch_size: Batch size per worker.
        seed: Seed shared by all workers.
        num_workers: W.
        worker_index: r.
        first_epoch: First epoch (0-based, inclusive).
        last_epoch: Last epoch (exclusive).
        recorder: If given, a :class:`course_lib.training.consumption.ConsumedIds` that records
            the ids (and padding flags) of every batch when the model pulls it.

    Returns:
        A prefetched ``tf.data.Dataset`` (not cached: each epoch is new).

    Raises:
        ShardError: Invalid sharding arguments.
        ValueError: ``last_epoch <= first_epoch`` or ``first_epoch < 0``.
    """
    check_shard_args(num_workers, worker_index, batch_size)
    if first_epoch < 0 or last_epoch <= first_epoch:
        raise ValueError(f"need 0 <= first_epoch < last_epoch, got first_epoch={first_epoch}, "
                         f"last_epoch={last_epoch}")
    n = len(labels)
    rows = np.stack([epoch_indices(n, seed=seed, epoch=e, num_workers=num_workers,
                                   worker_index=worker_index)
                     for e in range(first_epoch, last_epoch)])
    padding = np.tile(shard_padding(n, num_workers, worker_index), (len(rows), 1))
    return _batches_dataset(images, labels, rows, batch_size, cache=False,
                            epochs=np.arange(first_epoch, last_epoch), padding=padding,
                            recorder=recorder)


def distribute_for_strategy(strategy: Any, images: np.ndarray, labels: np.ndarray, *,
                            batch_size_per_replica: int, training: bool, seed: int = 0,
                            epochs: int | None = None, first_epoch: int = 0,
                            recorder: "ConsumedIds | None" = None) -> tuple[Any, int, int]:
    """Batches for a ``tf.distribute`` strategy (e.g. MirroredStrategy on one machine).

    The global batch is ``batch_size_per_replica * strategy.num_replicas_in_sync``; the strategy
    splits every global batch across its replicas.

    Args:
        strategy: A ``tf.distribute.Strategy``.
        images: uint8 images (N, 28, 28).
        labels: Integer labels (N,).
        batch_size_per_replica: Batch per replica (device).
        training: As in :func:`make_dataset`.
        seed: Shuffle seed.
        epochs: If given (training only), the dataset holds epochs ``0 .. epochs-1`` one after
            the other (see :func:`make_epochs_dataset`); use ``fit(..., epochs=epochs,
            steps_per_epoch=steps)``. If None, one epoch that repeats the same order.
        first_epoch: With ``epochs``, the dataset starts at this epoch (``first_epoch .. epochs-1``);
            ``fit(..., initial_epoch=first_epoch, epochs=epochs)`` then runs those epochs alone,
            e.g. one at a time, interleaved with other models (notebook 02's measurement).

    Returns:
        ``(distributed_dataset, global_batch_size, steps)``; Keras needs ``steps`` for a
        distributed dataset: ``fit(..., steps_per_epoch=steps)`` / ``evaluate(..., steps=steps)``.

    Raises:
        ShardError: ``batch_size_per_replica < 1``.
    """
    # Strategy: one reader; each step batch (per-replica batch x replicas) is split over the replicas.
    plan = EpochPlan(len(labels), batch_size_per_replica, int(strategy.num_replicas_in_sync), one_reader=True)
    global_batch = plan.step_batch
    if training and epochs is not None:
        ds = make_epochs_dataset(images, labels, batch_size=global_batch, seed=seed, num_workers=1,
                                 worker_index=0, first_epoch=first_epoch, last_epoch=epochs,
                                 recorder=recorder)
    else:
        ds = make_dataset(images, labels, batch_size=global_batch, training=training, seed=seed)
    return strategy.experimental_distribute_dataset(ds), global_batch, plan.steps_per_epoch
