"""Fashion-MNIST read straight from its verified IDX files with NumPy: no TensorFlow, no tfds.

Notebook 07's PyTorch and JAX scripts run in a venv without TensorFlow (``.venv-07``). They read the same
raw files as the rest of the course (:func:`course_lib.training.fmnist_files.find_raw_files`: Debian's
``dataset-fashion-mnist`` or ``$COURSE_DATA_DIR``), check each decompressed file against
:data:`~course_lib.training.fmnist_files.IDX_SHA256` before using a byte of it, and parse the IDX header.
The arrays are in the files' own order, which is NOT tfds' order (the TensorFlow scripts' order): the first
``N`` images of a subset are other images than tfds' first ``N``, the same in number. The sampler on top
(:func:`course_lib.training.pipeline.epoch_indices`: rank ``r`` takes ``r, r + W, ...``) is the course's.

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np

from course_lib.training.fmnist_files import IDX_SHA256, DataCorruptError, find_raw_files
from course_lib.training.machine.placement import shard_from_env

__all__ = ["read_idx", "load_idx_arrays"]

#: IDX type byte 0x08: unsigned bytes (the only type Fashion-MNIST uses).
_UBYTE = 0x08


def read_idx(raw: bytes, name: str = "IDX data") -> np.ndarray:
    """Parse decompressed IDX bytes: magic ``0 0 type ndim``, ``ndim`` big-endian sizes, then the data.

    Raises:
        DataCorruptError: A bad magic number, a type other than unsigned bytes, or a size that does not match.
    """
    if len(raw) < 4 or raw[0:2] != b"\0\0" or raw[2] != _UBYTE:
        raise DataCorruptError(f"{name}: not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    data = np.frombuffer(raw, dtype=np.uint8, offset=header)
    if data.size != int(np.prod(shape)):
        raise DataCorruptError(f"{name}: {data.size} bytes of data for shape {shape}")
    return data.reshape(shape)


def load_idx_arrays(train_subset: int | None = None, test_subset: int | None = None,
                    directory: Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four arrays ``(x_train, y_train, x_test, y_test)`` (uint8; images ``(N, 28, 28)``), verified.

    Args:
        train_subset, test_subset: Keep the first N examples of each split, in the files' order (None: all).
            A copy of a bound run (``COURSE_SHARD=i/N``, :func:`course_lib.training.machine.placement.shard_from_env`)
            then keeps every N-th training example from the i-th.
        directory: The folder of the four ``.gz`` files (default :func:`find_raw_files`).

    Raises:
        DataNotFoundError: No folder holds the files (the message says how to get them).
        DataCorruptError: A file whose decompressed sha256 is not the published one.
        ValueError: A subset outside 1..split size.
    """
    folder = find_raw_files() if directory is None else Path(directory)
    arrays = {}
    for stem, expected in IDX_SHA256.items():
        raw = gzip.decompress((folder / f"{stem}.gz").read_bytes())
        if hashlib.sha256(raw).hexdigest() != expected:
            raise DataCorruptError(f"{folder / stem}.gz is not the published Fashion-MNIST file (sha256 differs); "
                                   "reinstall it (sudo apt-get install --reinstall dataset-fashion-mnist)")
        arrays[stem] = read_idx(raw, stem)
    x_train, y_train = arrays["train-images-idx3-ubyte"], arrays["train-labels-idx1-ubyte"]
    x_test, y_test = arrays["t10k-images-idx3-ubyte"], arrays["t10k-labels-idx1-ubyte"]
    for name, value, size in (("train_subset", train_subset, len(x_train)), ("test_subset", test_subset, len(x_test))):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= size):
            raise ValueError(f"{name} must be an int in 1..{size} or None, got {value!r}")
    n, m = train_subset or len(x_train), test_subset or len(x_test)
    shard = shard_from_env()  # a copy of a bound run keeps its shard (course_lib.runner.multiworker.run_bound)
    index, count = shard or (0, 1)
    return x_train[:n][index::count], y_train[:n][index::count], x_test[:m], y_test[:m]
