"""Checkpoints written by rank 0, atomically, and restored on any number of workers.

Layout (one folder per epoch)::

    CHECKPOINT_DIR/epoch-0002/ckpt.index, ckpt.data-...   tf.train.Checkpoint: model, optimizer
    CHECKPOINT_DIR/latest.json                              {"epoch", "digest", "path", ...}

The epoch folder is written under a temporary name and renamed in one step; ``latest.json`` is
written atomically *last*, so a run killed at any moment leaves either the previous complete
checkpoint or the new one, never a half-written one.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from course_lib.training.files import atomic_write_json
from course_lib.training.models import weights_digest

__all__ = ["CheckpointError", "find_latest_checkpoint", "save_checkpoint", "restore_checkpoint"]

LATEST = "latest.json"
_KEEP = 2  # epoch folders kept on disk


class CheckpointError(RuntimeError):
    """A checkpoint folder is missing, empty, inconsistent or does not match the model."""


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
    _checkpoint(model, optimizer).read(info["path"]).expect_partial()
    digest = weights_digest(model)
    if digest != info["digest"]:
        raise CheckpointError(
            f"restored weights have digest {digest[:12]}... but the checkpoint of epoch "
            f"{info['epoch']} recorded {info['digest'][:12]}...: the model does not match the "
            "checkpoint (different architecture or --mixed-precision?)."
        )
    return digest
