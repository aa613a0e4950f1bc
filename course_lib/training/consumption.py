"""Which training examples a worker actually consumed: counts and an order-free hash per epoch.

The input pipeline (:mod:`course_lib.training.pipeline`) carries each example's id (its row in
the training arrays) and a padding flag next to the batch; a :class:`ConsumedIds` recorder sees
every batch the model pulls and keeps, per epoch, the ids it trained on. :func:`summarize_ids`
turns a set of ids into a few numbers a rank can print as the ``consumed`` JSON line
(docs/architecture.md): ``count``, ``unique``, ``ids_sum`` and ``ids_hash``, the sum modulo
2**64 of a 64-bit mix of each id. The hash is order-free, so the union of disjoint shards hashes
to the sum of their hashes: ``course_lib.lessons.common.coverage`` checks from these numbers alone that
the shards are disjoint and cover the training set exactly.

This module is TF-free (numpy only).

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

__all__ = ["mix64", "ids_hash", "summarize_ids", "ConsumedIds"]

_MASK = (1 << 64) - 1


def mix64(ids: np.ndarray | Iterable[int]) -> np.ndarray:
    """SplitMix64's finaliser of each id (uint64, wrapping arithmetic): a well-spread 64-bit value.

    Args:
        ids: Non-negative integer ids.

    Returns:
        uint64 array of the same length.
    """
    z = np.asarray(ids, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def ids_hash(ids: np.ndarray | Iterable[int]) -> int:
    """Order-free hash of a multiset of ids: ``sum(mix64(id)) mod 2**64``.

    ``ids_hash(a) + ids_hash(b) == ids_hash(a ∪ b)`` (mod 2**64) for disjoint ``a`` and ``b``.

    Args:
        ids: Non-negative integer ids (repeats count as often as they appear).

    Returns:
        An int in ``[0, 2**64)``.
    """
    mixed = mix64(ids)
    with np.errstate(over="ignore"):
        return int(np.sum(mixed, dtype=np.uint64)) & _MASK


def summarize_ids(ids: np.ndarray | Iterable[int]) -> dict[str, int]:
    """The numbers of a ``consumed`` event for the ids one rank trained on in one epoch.

    Args:
        ids: The ids, in any order, repeats included.

    Returns:
        ``{"count", "unique", "ids_sum", "ids_hash"}``: how many were consumed, how many distinct,
        the plain sum of the distinct ids and :func:`ids_hash` of the distinct ids.
    """
    arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
    distinct = np.unique(arr)
    return {"count": int(arr.size), "unique": int(distinct.size),
            "ids_sum": int(distinct.sum()), "ids_hash": ids_hash(distinct)}


class ConsumedIds:
    """Per-epoch record of the example ids a worker's model pulled from its input pipeline.

    Pass it to ``pipeline.make_epochs_dataset(..., recorder=...)``: the last stage of the
    pipeline calls :meth:`record` for every batch when the model pulls it.

    Introduced in notebooks/02_mirrored_strategy.ipynb.
    """

    def __init__(self) -> None:
        self._ids: dict[int, list[np.ndarray]] = {}
        self._padding: dict[int, list[np.ndarray]] = {}

    def record(self, epoch: Any, ids: Any, padding: Any) -> None:
        """Record one batch: its epoch (0-based), ids and padding flags (True: a padded copy)."""
        epoch = int(np.asarray(epoch))
        ids, padding = np.asarray(ids, dtype=np.int64), np.asarray(padding, dtype=bool)
        self._ids.setdefault(epoch, []).append(ids[~padding])
        self._padding.setdefault(epoch, []).append(ids[padding])

    def epochs(self) -> list[int]:
        """The epochs (0-based) of which at least one batch was pulled."""
        return sorted(self._ids)

    def ids(self, epoch: int) -> np.ndarray:
        """The real (not padded) ids consumed in ``epoch``, in the order they were consumed."""
        parts = self._ids.get(epoch, [])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def padded_ids(self, epoch: int) -> np.ndarray:
        """The ids consumed in ``epoch`` as padding (copies that even out the shards)."""
        parts = self._padding.get(epoch, [])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def event(self, epoch: int, rank: int) -> dict[str, int]:
        """Fields of the ``consumed`` event of ``epoch`` (reported 1-based, like ``epoch`` events).

        Returns:
            ``{"rank", "epoch", "count", "unique", "ids_sum", "ids_hash", "padding",
            "padding_hash"}``: the first four numbers describe the real ids, ``padding`` counts
            the padded copies and ``padding_hash`` is their :func:`ids_hash`.
        """
        padded = self.padded_ids(epoch)
        return {"rank": int(rank), "epoch": int(epoch) + 1, **summarize_ids(self.ids(epoch)),
                "padding": int(padded.size), "padding_hash": ids_hash(padded)}
