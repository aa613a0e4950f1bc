"""Shared pieces of the training scripts: flag types, JSON lines, epoch arithmetic, checkpoints.

``source_code/horovod_fmnist.py`` and ``source_code/mirrored_fmnist.py`` use these helpers so
that the scripts themselves show only the distributed-training lines. Nothing here imports
TensorFlow at module level: the scripts parse and check their flags before TensorFlow (or
Horovod) starts, so that a bad flag fails in a fraction of a second.

Checkpoints (one folder per epoch, written by rank 0 only)::

    CHECKPOINT_DIR/epoch-0002/ckpt.index, ckpt.data-...   tf.train.Checkpoint: model, optimizer
    CHECKPOINT_DIR/latest.json                              {"epoch", "digest", "path", ...}

The epoch folder is written under a temporary name and renamed in one step; ``latest.json`` is
written atomically *last*, so a run killed at any moment leaves either the previous complete
checkpoint or the new one, never a half-written one.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

import numpy as np

from course_lib.files import atomic_write_json

__all__ = [
    "OPTIMIZERS",
    "HelpFormatter",
    "CheckpointError",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "emit",
    "epoch_arithmetic",
    "describe_epoch",
    "reseed_dropout",
    "find_latest_checkpoint",
    "save_checkpoint",
    "restore_checkpoint",
]

OPTIMIZERS = ("adam", "sgd", "lars", "lamb")
LATEST = "latest.json"
_KEEP = 2  # epoch folders kept on disk


class CheckpointError(RuntimeError):
    """A checkpoint folder is missing, empty, inconsistent or does not match the model."""


# ------------------------------------------------------------------------- argparse types
class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` shows every default, and keeps the epilog's example command on one line.

    A help text that already says its default in words ("default: all 60000") is left as it is,
    and so are flags whose default is None or False (nothing useful to add).
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False:
            return text
        return super()._get_help_string(action)


def _parse_number(text: str, kind: type, minimum: float, what: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum or (kind is float and not np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _parse_number(text, int, 1, "an integer >= 1")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _parse_number(text, int, 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _parse_number(text, float, 0.0, "a number > 0")
    if value == 0.0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


# ------------------------------------------------------------------------- output
def emit(event: str, enabled: bool = True, stream: IO[str] | None = None, **fields: Any) -> None:
    """Print one JSON line ``{"event": event, **fields}`` (docs/architecture.md) and flush.

    Args:
        event: Event name (``config``, ``checkpoint``, ``resume``, ``result``, ``digest``).
        enabled: Print only when True (the scripts pass ``args.json``).
        stream: Where to print; standard output by default.
        **fields: JSON-serialisable values.
    """
    if enabled:
        print(json.dumps({"event": event, **fields}), file=stream or sys.stdout, flush=True)


def epoch_arithmetic(train_size: int, per_worker_batch: int, workers: int,
                     backward_passes_per_step: int = 1) -> dict[str, int]:
    """What one epoch means: one pass over the training set by all workers together.

    Args:
        train_size: Training examples N.
        per_worker_batch: Batch of one worker (or replica) per step, b.
        workers: Horovod processes or MirroredStrategy replicas, W.
        backward_passes_per_step: Horovod gradient accumulation k (batches per update).

    Returns:
        ``shard_size`` = ceil(N / W); ``steps_per_epoch`` = ceil(shard / b) (training steps every
        worker runs, = ceil(N / (b·W)) when W divides N); ``samples_per_epoch`` = shard·W;
        ``step_batch`` = b·W (images per step); ``global_batch`` = b·W·k (images per optimizer
        update); ``updates_per_epoch`` = steps // k.
    """
    from course_lib import data

    shard = data.shard_size(train_size, workers)
    steps = data.steps_per_epoch(train_size, per_worker_batch, workers)
    return {
        "shard_size": shard,
        "steps_per_epoch": steps,
        "samples_per_epoch": data.samples_per_epoch(train_size, workers),
        "step_batch": per_worker_batch * workers,
        "global_batch": per_worker_batch * workers * backward_passes_per_step,
        "updates_per_epoch": steps // backward_passes_per_step,
    }


def describe_epoch(arith: dict[str, int], train_size: int, per_worker_batch: int, workers: int,
                   backward_passes_per_step: int = 1, unit: str = "worker") -> str:
    """Human-readable version of :func:`epoch_arithmetic` (printed at start by rank 0)."""
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


# ------------------------------------------------------------------------- dropout RNG
def reseed_dropout(model: Any, seed: int, epoch: int) -> int:
    """Reset the ``tf.random.Generator`` of every dropout-like layer from ``(seed, epoch)``.

    With ``tf.keras.backend.experimental.enable_tf_random_generator()`` called before the model
    is built, Keras layers draw their masks from a ``tf.random.Generator``. Resetting it at each
    epoch start makes the masks of epoch ``e`` depend only on ``(seed, e, layer index)``, so a run
    resumed at epoch ``e`` draws exactly the masks of an uninterrupted run (the generators are
    not part of ``model.variables`` and Horovod does not broadcast them).

    Args:
        model: A Keras model.
        seed: The run's seed.
        epoch: 0-based epoch about to start.

    Returns:
        Number of generators reset (0 if the legacy stateful RNG is in use: then the masks are
        NOT reproducible after a restart).
    """
    count = 0
    for index, layer in enumerate(model.layers):
        # Keras keeps the generator in a private attribute; there is no public accessor.
        generator = getattr(getattr(layer, "_random_generator", None), "_generator", None)
        if generator is not None and hasattr(generator, "reset_from_seed"):
            state = np.random.SeedSequence([int(seed), int(epoch), index]).generate_state(1)[0]
            generator.reset_from_seed(int(state))
            count += 1
    return count


# ------------------------------------------------------------------------- checkpoints
def find_latest_checkpoint(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``latest.json`` of a checkpoint folder and check that its files exist.

    Args:
        directory: The ``--checkpoint-dir`` of an earlier run.

    Returns:
        ``{"epoch": int, "digest": str, "path": absolute checkpoint prefix, ...}``.

    Raises:
        CheckpointError: The folder or ``latest.json`` is missing, unreadable, or names files
            that are not there.
    """
    folder = Path(directory)
    meta_path = folder / LATEST
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint folder {folder} does not exist; run once without "
                              "--resume (with --checkpoint-dir) to create it.")
    if not meta_path.is_file():
        raise CheckpointError(f"{folder} holds no complete checkpoint ({LATEST} is missing); run "
                              "without --resume first, or point --checkpoint-dir at the right folder.")
    try:
        meta = json.loads(meta_path.read_text())
        epoch, digest, rel = int(meta["epoch"]), str(meta["digest"]), str(meta["path"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{meta_path} is unreadable ({exc}); delete the folder and start "
                              "again without --resume.") from exc
    prefix = folder / rel
    if not Path(str(prefix) + ".index").is_file():
        raise CheckpointError(f"{meta_path} names {prefix} but its files are missing; delete the "
                              "folder and start again without --resume.")
    return {**meta, "epoch": epoch, "digest": digest, "path": str(prefix)}


def _checkpoint(model: Any, optimizer: Any) -> Any:
    import tensorflow as tf

    return tf.train.Checkpoint(model=model, optimizer=optimizer)


def save_checkpoint(directory: str | os.PathLike[str], *, model: Any, optimizer: Any, epoch: int,
                    digest: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Save model + optimizer state after ``epoch`` epochs, atomically (call on rank 0 only).

    Args:
        directory: Checkpoint folder (created if missing).
        model: The Keras model.
        optimizer: Its optimizer (slots, iterations, learning rate are saved).
        epoch: Number of complete epochs so far (1-based).
        digest: ``weights_digest(model)``, recorded to verify the restore.
        extra: More JSON fields for ``latest.json`` (e.g. the run's flags).

    Returns:
        The ``latest.json`` content, with ``path`` absolute.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"epoch-{epoch:04d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=folder))
    try:
        _checkpoint(model, optimizer).write(str(tmp / "ckpt"))
        final = folder / name
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    meta = {"epoch": int(epoch), "digest": digest, "path": f"{name}/ckpt", **(extra or {})}
    atomic_write_json(folder / LATEST, meta)  # the commit point
    epochs = sorted(p for p in folder.glob("epoch-*") if p.is_dir())
    for old in epochs[:-_KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in folder.glob(".epoch-*"):  # temp folders of killed runs
        shutil.rmtree(stale, ignore_errors=True)
    return {**meta, "path": str(folder / name / "ckpt")}


def restore_checkpoint(info: dict[str, Any], *, model: Any, optimizer: Any) -> str:
    """Restore model + optimizer from :func:`find_latest_checkpoint`'s result and verify it.

    Build the optimizer's slots first (``optimizer.build(model.trainable_variables)``) so that
    they are restored at once rather than lazily.

    Args:
        info: The dict returned by :func:`find_latest_checkpoint`.
        model: A model with the same architecture.
        optimizer: An optimizer of the same kind.

    Returns:
        The digest of the restored weights (equal to ``info["digest"]``).

    Raises:
        CheckpointError: The restored weights do not match the digest recorded at save time.
    """
    from course_lib.models import weights_digest

    _checkpoint(model, optimizer).read(info["path"]).expect_partial()
    digest = weights_digest(model)
    if digest != info["digest"]:
        raise CheckpointError(
            f"restored weights have digest {digest[:12]}... but the checkpoint of epoch "
            f"{info['epoch']} recorded {info['digest'][:12]}...: the model does not match the "
            "checkpoint (different architecture or --mixed-precision?)."
        )
    return digest
