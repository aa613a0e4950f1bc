"""Did the workers train on every example exactly once? A verdict from the ranks' own reports.

Each rank of a training script prints one ``consumed`` JSON line per epoch
(docs/architecture.md), computed from the ids its input pipeline actually handed to the model
(:class:`course_lib.training.consumption.ConsumedIds`). From those numbers alone,
:func:`check_coverage` decides, for every epoch, that

* every expected reader (rank) reported, once;
* the real (not padded) ids of all ranks add up to the training set: as many ids as examples,
  no rank consumed an id twice, and the order-free hash and the plain sum of the ids of all
  ranks equal those of ``range(train_size)`` (so the shards are disjoint and leave no gap);
* the padded copies number exactly the documented ``(W - N % W) % W``.

It is TF-free and pure: give it a run's events, get a :class:`Coverage`.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from course_lib.training.consumption import ids_hash

__all__ = ["Coverage", "check_coverage"]

_MOD = 1 << 64


@dataclass
class Coverage:
    """The verdict of :func:`check_coverage`.

    Attributes:
        ok: True when every epoch passed every check.
        train_size: N, the number of training examples.
        readers: W, the ranks expected to report (each reads one shard).
        epochs: The epochs (1-based) that were checked.
        repeats: Examples consumed beyond the documented padding (over all epochs).
        problems: One readable line per failed check.
    """

    ok: bool
    train_size: int
    readers: int
    epochs: list[int] = field(default_factory=list)
    repeats: int = 0
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        if self.ok:
            detail = (f"{self.train_size} ids, {self.readers} rank{'s' * (self.readers != 1)}, "
                      f"{len(self.epochs)} epoch{'s' * (len(self.epochs) != 1)}, "
                      f"{self.repeats} repeats beyond padding")
        else:
            detail = "; ".join(self.problems)
        return f"every training image exactly once: {self.ok} ({detail})"


def _event_dicts(run: Any) -> list[tuple[int | None, dict]]:
    """``[(rank, event)]`` from a RunResult, a list of ``(rank, event)`` or a list of events."""
    items = getattr(run, "events", run)
    pairs: list[tuple[int | None, dict]] = []
    for item in items:
        if isinstance(item, dict):
            pairs.append((item.get("rank"), item))
        else:
            rank, event = item
            pairs.append((rank, event))
    return pairs


def check_coverage(run: Any, *, train_size: int | None = None,
                   readers: int | None = None) -> Coverage:
    """Check from the ``consumed`` events that each epoch used every training example once.

    Args:
        run: A ``course_lib.runner.runlog.RunResult``, its ``events`` list of ``(rank, event)``,
            or a plain list of event dicts.
        train_size: N; default: the ``config`` event's ``train_size``.
        readers: Ranks that each read one shard; default: the ``config`` event's ``workers`` for
            Horovod, 1 for MirroredStrategy (one process reads for all replicas).

    Returns:
        A :class:`Coverage`; ``str()`` of it is the verdict line a notebook prints, e.g.
        ``every training image exactly once: True (60000 ids, 2 ranks, 1 epoch, 0 repeats beyond
        padding)``.

    Raises:
        ValueError: ``train_size`` or ``readers`` is neither given nor in a ``config`` event.

    Introduced in notebooks/02_mirrored_strategy.ipynb.
    """
    pairs = _event_dicts(run)
    config = next((e for _, e in pairs if e.get("event") == "config"), None)
    if train_size is None:
        if config is None or "train_size" not in config:
            raise ValueError("pass train_size= (the run printed no config event with train_size)")
        train_size = int(config["train_size"])
    if readers is None:
        if config is None or "workers" not in config:
            raise ValueError("pass readers= (the run printed no config event with workers)")
        readers = 1 if config.get("strategy") == "mirrored" else int(config["workers"])
    consumed = [e for _, e in pairs if e.get("event") == "consumed"]
    cov = Coverage(ok=True, train_size=train_size, readers=readers)
    if not consumed:
        cov.ok = False
        cov.problems.append("no consumed events: run the script with --json")
        return cov
    expected_sum, expected_hash = train_size * (train_size - 1) // 2, ids_hash(range(train_size))
    expected_padding = (-train_size) % readers
    for epoch in sorted({int(e["epoch"]) for e in consumed}):
        cov.epochs.append(epoch)
        found = [e for e in consumed if int(e["epoch"]) == epoch]
        cov.problems.extend(f"epoch {epoch}: {p}" for p in _epoch_problems(
            found, train_size, readers, expected_sum, expected_hash, expected_padding))
        count = sum(int(e["count"]) + int(e.get("padding", 0)) for e in found)
        cov.repeats += max(0, count - train_size - expected_padding)
    cov.ok = not cov.problems
    return cov


def _epoch_problems(found: list[dict], n: int, readers: int, expected_sum: int,
                    expected_hash: int, expected_padding: int) -> Iterable[str]:
    ranks = sorted(int(e["rank"]) for e in found)
    if ranks != list(range(readers)):
        yield f"ranks {ranks} reported, expected {list(range(readers))}"
    count = sum(int(e["count"]) for e in found)
    unique = sum(int(e["unique"]) for e in found)
    if count != unique:
        yield f"{count - unique} ids consumed twice by the same rank"
    if unique != n:
        yield f"{unique} distinct ids over the ranks for {n} examples"
    if sum(int(e["ids_sum"]) for e in found) != expected_sum or \
            sum(int(e["ids_hash"]) for e in found) % _MOD != expected_hash:
        yield "the ranks' ids are not range(N) once: shards overlap or leave a gap"
    padding = sum(int(e.get("padding", 0)) for e in found)
    if padding != expected_padding:
        yield f"{padding} padded copies, documented {expected_padding} = (W - N % W) % W"
