"""A verified NumPy copy of tfds' Fashion-MNIST, so that every launch does not decode 70 000 PNGs again.

``tfds.builder(...).as_dataset`` decodes every image of the prepared TFRecords on each call (several
CPU-seconds per process; every rank of every run pays it). After a load whose content was verified,
:func:`store` writes the four arrays to ``<data_dir>/fashion_mnist/course-arrays-<key>.npz``; the key
hashes the names, sizes and modification times of the TFRecord files, so a changed or re-prepared
data set never reads a stale copy. :func:`lookup` returns the copy only when each array's sha256
equals :data:`course_lib.training.fmnist_files.TFDS_ARRAYS_SHA256` (the published examples in tfds'
own order, about 0.1 s to check); anything else (missing, unreadable, altered) falls back to tfds,
whose output is verified as before. A folder the process cannot write (a room's shared, read-only
data) simply gets no copy.

Introduced in notebooks/00_setup.ipynb (every notebook's data load goes through it).
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np

from course_lib.training.files import atomic_write_bytes
from course_lib.training.fmnist_files import TFDS_ARRAYS_SHA256

__all__ = ["cache_path", "lookup", "store", "arrays_match"]

_FIELDS = ("x_train", "y_train", "x_test", "y_test")


def cache_path(data_dir: Path) -> Path | None:
    """Where the copy of the data set prepared in ``data_dir`` lives, or None if none is prepared.

    Args:
        data_dir: The tfds data folder (the one holding ``fashion_mnist/<version>/``).

    Returns:
        ``<data_dir>/fashion_mnist/course-arrays-<key>.npz``; the key changes with any TFRecord file.
    """
    folder = data_dir / "fashion_mnist"
    records = sorted(folder.glob("*/fashion_mnist-*.tfrecord*"))
    if not records:
        return None
    key = hashlib.sha256()
    for record in records:
        stat = record.stat()
        key.update(f"{record.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return folder / f"course-arrays-{key.hexdigest()[:16]}.npz"


def arrays_match(arrays: dict[str, np.ndarray]) -> bool:
    """True when every array holds exactly the published examples in tfds' order."""
    return all(name in arrays and hashlib.sha256(np.ascontiguousarray(arrays[name]).tobytes()).hexdigest()
               == TFDS_ARRAYS_SHA256[name] for name in _FIELDS)


def lookup(data_dir: Path) -> dict[str, np.ndarray] | None:
    """The verified copy's four arrays, or None (no copy, unreadable, stale or altered: use tfds).

    Args:
        data_dir: The tfds data folder.

    Returns:
        ``{"x_train": ..., "y_train": ..., "x_test": ..., "y_test": ...}`` (uint8), or None.
    """
    path = cache_path(data_dir)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: np.asarray(npz[name], dtype=np.uint8) for name in _FIELDS}
    except (OSError, ValueError, KeyError):
        return None
    return arrays if arrays_match(arrays) else None


def store(data_dir: Path, arrays: dict[str, np.ndarray]) -> Path | None:
    """Write the copy (atomically) after a verified load; stale copies are removed. Best effort.

    Args:
        data_dir: The tfds data folder.
        arrays: The four arrays tfds returned; nothing is written unless :func:`arrays_match`.

    Returns:
        The copy's path, or None when nothing was written (content differs, or folder not writable).
    """
    path = cache_path(data_dir)
    if path is None or not arrays_match(arrays):
        return None
    buffer = io.BytesIO()
    np.savez(buffer, x_train=arrays["x_train"], y_train=arrays["y_train"], x_test=arrays["x_test"],
             y_test=arrays["y_test"])  # _FIELDS, by name (NumPy 2.5's stubs refuse a ** of arrays)
    try:
        atomic_write_bytes(path, buffer.getvalue())
        os.chmod(path, 0o644)  # readable by every account that reads the data set (a room's learners)
        for stale in path.parent.glob("course-arrays-*.npz"):
            if stale != path:
                stale.unlink(missing_ok=True)
    except OSError:
        return None
    return path
