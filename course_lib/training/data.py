"""Real Fashion-MNIST as NumPy arrays, through the real loaders (tfds primary, keras alternative).

On an offline machine the raw files found by :mod:`course_lib.training.fmnist_files` are handed
to those loaders through their own mechanisms: the keras cache folder, and the tfds manual folder.
Input pipelines (sharding, per-epoch order) live in :mod:`course_lib.training.pipeline`.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from course_lib.training import tfds_cache
from course_lib.training.files import atomic_write_bytes
from course_lib.training.machine.placement import shard_from_env
from course_lib.training.fmnist_files import (
    GET_DATA_HINT, IDX_SHA256, SORTED_ROWS_SHA256, DataCorruptError, DataError, DataNotFoundError,
    find_raw_files, stage_tfds_manual)

__all__ = [
    "TRAIN_SIZE",
    "TEST_SIZE",
    "NUM_CLASSES",
    "CLASS_NAMES",
    "DataError",
    "DataNotFoundError",
    "DataCorruptError",
    "FashionMNIST",
    "load_arrays",
    "resolve_data_dir",
    "idx_sha256",
    "sorted_rows_sha256",
]

TRAIN_SIZE = 60_000
TEST_SIZE = 10_000
NUM_CLASSES = 10
CLASS_NAMES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
class FashionMNIST(NamedTuple):
    """The four Fashion-MNIST arrays: uint8 images (N, 28, 28) and uint8 labels (N,)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def _keras_cache_dir() -> Path:
    """Folder where Keras 2's (tf_keras) ``get_file`` looks for ``fashion-mnist/<stem>.gz``."""
    base = Path("~/.keras").expanduser()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    if not os.access(base, os.W_OK):  # same fallback as keras.utils.get_file
        base = Path("/tmp/.keras")
    return base / "datasets" / "fashion-mnist"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The tfds data folder a load uses: the ONE place that decides it.

    Args:
        data_dir: The folder, as ``tfds.load(data_dir=...)`` takes it (a script's ``--data-dir``);
            ``None``: ``$COURSE_TFDS_DIR`` (the course's own setting, e.g. a room's shared copy),
            else ``$TFDS_DATA_DIR`` (tfds's), else ``~/tensorflow_datasets`` (tfds's default).

    Returns:
        The folder, ``~`` expanded (it need not exist yet: tfds prepares it).

    Introduced in notebooks/01_data_parallelism.ipynb.
    """
    if data_dir is not None and str(data_dir):
        return Path(data_dir).expanduser()
    explicit = os.environ.get("COURSE_TFDS_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets")).expanduser()


def _raw_dir_or_none() -> Path | None:
    try:
        return find_raw_files()
    except DataNotFoundError:
        return None


# --------------------------------------------------------------------------- loaders
def _load_tfds(data_dir: Path) -> tuple[FashionMNIST, bool]:
    """The arrays, and whether their content is already verified (the checked NumPy copy)."""
    cached = tfds_cache.lookup(data_dir)  # a verified copy of an earlier load (no PNG decoding)
    if cached is not None:
        return FashionMNIST(**cached), True
    import tensorflow_datasets as tfds

    manual_dir = data_dir / "downloads" / "manual"
    builder = tfds.builder("fashion_mnist", data_dir=str(data_dir))
    try:
        if not builder.is_prepared():
            raw = _raw_dir_or_none()
            if raw is not None:
                stage_tfds_manual(raw, manual_dir)
            # tfds announces the one-off preparation on stdout; send it to stderr so a notebook's
            # stdout is the same whether the data set was prepared by this call or earlier.
            with contextlib.redirect_stdout(sys.stderr):
                builder.download_and_prepare(
                    download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir))
                )
        splits = builder.as_dataset(split=["train", "test"], batch_size=-1, as_supervised=True,
                                    shuffle_files=False)
    except DataError:
        raise
    except Exception as exc:  # tfds raises many types; report the cause, never fall back silently
        raise DataError(
            f"tfds could not prepare fashion_mnist in {data_dir}: {type(exc).__name__}: {exc}. "
            f"{GET_DATA_HINT} Or use load_arrays(source='keras')."
        ) from exc
    (x_train, y_train), (x_test, y_test) = tfds.as_numpy(splits)
    data = FashionMNIST(x_train[..., 0], y_train, x_test[..., 0], y_test)
    # The copy is written only when the arrays match the published digests: then they are verified.
    stored = tfds_cache.store(data_dir, {k: np.asarray(v, dtype=np.uint8) for k, v in data._asdict().items()})
    return data, stored is not None


def _load_keras(data_dir: Path) -> tuple[FashionMNIST, bool]:  # keras keeps its own cache (~/.keras)
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    cache = _keras_cache_dir()
    raw = _raw_dir_or_none()
    if raw is not None and raw.resolve() != cache.resolve():
        for stem in IDX_SHA256:
            target = cache / f"{stem}.gz"
            if not target.exists():
                atomic_write_bytes(target, (raw / f"{stem}.gz").read_bytes())
    try:
        (x_train, y_train), (x_test, y_test) = keras.datasets.fashion_mnist.load_data()
    except Exception as exc:
        raise DataError(f"keras could not load fashion_mnist: {type(exc).__name__}: {exc}. "
                        f"{GET_DATA_HINT}") from exc
    return FashionMNIST(x_train, y_train, x_test, y_test), False


def _check_loaded(data: FashionMNIST, source: str, data_dir: Path, *, verified: bool = False) -> None:
    expected = {"x_train": (TRAIN_SIZE, 28, 28), "y_train": (TRAIN_SIZE,),
                "x_test": (TEST_SIZE, 28, 28), "y_test": (TEST_SIZE,)}
    for name, shape in expected.items():
        array = getattr(data, name)
        if array.shape != shape:
            raise DataCorruptError(f"{source} returned {name} of shape {array.shape}, expected {shape}; "
                                   "delete its cache and load again.")
    for name in ("y_train", "y_test"):
        labels = getattr(data, name)
        if labels.min() < 0 or labels.max() >= NUM_CLASSES:
            raise DataCorruptError(f"{source} returned {name} outside 0..{NUM_CLASSES - 1}")
    if not verified:  # the tfds copy's digests were checked when it was read or written
        _check_content(data, source, data_dir)


# --------------------------------------------------------------------------- content digests
def idx_sha256(array: np.ndarray) -> str:
    """sha256 of the IDX file that holds ``array`` (uint8 images (N, 28, 28) or labels (N,)).

    The IDX header (magic number, dimensions) is rebuilt in front of the array's bytes, so the digest
    equals the one of the decompressed raw file when the array holds exactly its examples, in order.

    Args:
        array: Images or labels, in the file's (IDX) order.

    Returns:
        The hex digest, comparable with :data:`course_lib.training.fmnist_files.IDX_SHA256`.
    """
    array = np.ascontiguousarray(array, dtype=np.uint8)
    magic = 0x0800 + array.ndim  # 0x0803: uint8 with 3 dimensions (images), 0x0801: labels
    header = struct.pack(f">{1 + array.ndim}I", magic, *array.shape)
    return hashlib.sha256(header + array.tobytes()).hexdigest()


def sorted_rows_sha256(images: np.ndarray, labels: np.ndarray) -> str:
    """Order-free digest of a split: sha256 of its (784 pixels + label) rows sorted bytewise.

    Args:
        images: uint8 (N, 28, 28), in any order.
        labels: uint8 (N,), in the same order as ``images``.

    Returns:
        The hex digest, comparable with :data:`course_lib.training.fmnist_files.SORTED_ROWS_SHA256`.
    """
    rows = np.concatenate([np.asarray(images, np.uint8).reshape(len(images), -1),
                           np.asarray(labels, np.uint8).reshape(-1, 1)], axis=1)
    rows = np.ascontiguousarray(rows).view(f"V{rows.shape[1]}").ravel()
    return hashlib.sha256(np.sort(rows).tobytes()).hexdigest()


def _check_content(data: FashionMNIST, source: str, data_dir: Path) -> None:
    """Raise DataCorruptError unless every array holds the published bytes (about 0.1 s; tfds 0.5 s)."""
    if source == "keras":  # IDX order: each array is one raw file's data
        bad = [stem for stem, array in (("train-images-idx3-ubyte", data.x_train),
                                        ("train-labels-idx1-ubyte", data.y_train),
                                        ("t10k-images-idx3-ubyte", data.x_test),
                                        ("t10k-labels-idx1-ubyte", data.y_test))
               if idx_sha256(array) != IDX_SHA256[stem]]
        where = ", ".join(str(_keras_cache_dir() / f"{stem}.gz") for stem in bad)
        remedy = f"delete {where} and load again (the intact raw files are copied back)"
    elif tfds_cache.arrays_match(data._asdict()):  # exactly tfds' published order (the fast, strict check)
        bad = []
        remedy = ""
    else:  # tfds keeps its own order: compare the order-free digest of each split
        bad = [split for split, x, y in (("train", data.x_train, data.y_train),
                                         ("t10k", data.x_test, data.y_test))
               if sorted_rows_sha256(x, y) != SORTED_ROWS_SHA256[split]]
        where = str(data_dir / "fashion_mnist")
        remedy = f"delete {where} and load again (tfds prepares it afresh)"
    if bad:
        raise DataCorruptError(f"{source} returned data that differ from the published Fashion-MNIST "
                               f"({', '.join(bad)}: sha256 mismatch); {remedy}.")


def load_arrays(source: str = "tfds", *, train_subset: int | None = None,
                test_subset: int | None = None,
                data_dir: str | os.PathLike[str] | None = None) -> FashionMNIST:
    """Load the real Fashion-MNIST as numpy arrays, verified.

    Offline, the raw files found by :func:`find_raw_files` feed the real loaders: for tfds they
    are restored to the upstream bytes (gzip header) and placed in the tfds manual folder
    ``<data_dir>/downloads/manual`` (:func:`resolve_data_dir`); tfds prepares the dataset once
    (about 10 s). For keras they are
    copied to ``~/.keras/datasets/fashion-mnist`` when absent. Note that tfds stores the examples in
    its own (fixed, deterministic) order, which differs from the IDX order keras returns; both hold
    the same examples.

    Args:
        source: ``"tfds"`` (``tfds.load("fashion_mnist")``) or ``"keras"``
            (``keras.datasets.fashion_mnist.load_data()``).
        train_subset: Keep only the FIRST ``train_subset`` training examples (None: all 60 000). A copy of
            a bound run (``COURSE_SHARD=i/N``, :func:`course_lib.training.machine.placement.shard_from_env`) then
            keeps every N-th of them from the i-th, the shard rank i of N workers trains.
        test_subset: Keep only the FIRST ``test_subset`` test examples (None: all 10 000).
        data_dir: The tfds data folder (``None``: :func:`resolve_data_dir`'s environment order).

    Returns:
        A :class:`FashionMNIST` of uint8 arrays, images (N, 28, 28), labels (N,).

    Raises:
        ValueError: Unknown ``source`` or a subset outside 1..split size.
        DataError: The loader failed (the cause is in the message).
        DataCorruptError: The loaded arrays are not the real Fashion-MNIST: shape, label range, or
            content (sha256 of the arrays, checked on every load: a cache with one changed pixel
            is refused).
    """
    loaders = {"tfds": _load_tfds, "keras": _load_keras}
    if source not in loaders:
        raise ValueError(f"source must be 'tfds' or 'keras', got {source!r}")
    for name, value, limit in (("train_subset", train_subset, TRAIN_SIZE),
                               ("test_subset", test_subset, TEST_SIZE)):
        if value is not None and (not isinstance(value, int) or not 1 <= value <= limit):
            raise ValueError(f"{name} must be an int in 1..{limit} or None, got {value!r}")
    folder = resolve_data_dir(data_dir)
    data, verified = loaders[source](folder)
    _check_loaded(data, source, folder, verified=verified)
    data = FashionMNIST(*(np.asarray(a, dtype=np.uint8) for a in data))
    if train_subset is not None:
        data = data._replace(x_train=data.x_train[:train_subset], y_train=data.y_train[:train_subset])
    shard = shard_from_env()  # a copy of a bound run trains its shard only (course_lib.runner.multiworker.run_bound)
    if shard is not None:
        data = data._replace(x_train=data.x_train[shard[0]::shard[1]], y_train=data.y_train[shard[0]::shard[1]])
    if test_subset is not None:
        data = data._replace(x_test=data.x_test[:test_subset], y_test=data.y_test[:test_subset])
    return data
