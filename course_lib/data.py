"""Real Fashion-MNIST: locate, verify, load (tfds or keras) and feed it to training.

Loading goes through the real loaders, ``tensorflow_datasets`` (primary) and
``tf.keras.datasets`` (alternative). On an offline machine the raw IDX ``.gz`` files found on
disk (Debian package ``dataset-fashion-mnist``, or ``$COURSE_DATA_DIR``) are handed to those
loaders through their own mechanisms: the keras cache folder, and the tfds manual folder.

Pipelines (:func:`make_dataset`, :func:`make_epochs_dataset`, defined in :mod:`course_lib.pipeline`
and re-exported here) shard the data for Horovod so that every worker runs the same number of
steps and every example is seen once per epoch.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import struct
import sys
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from course_lib.files import atomic_write_bytes

__all__ = [
    "TRAIN_SIZE",
    "TEST_SIZE",
    "NUM_CLASSES",
    "CLASS_NAMES",
    "IDX_SHA256",
    "SYSTEM_DATA_DIRS",
    "DataError",
    "DataNotFoundError",
    "DataCorruptError",
    "ShardError",
    "FashionMNIST",
    "search_paths",
    "find_raw_files",
    "verify_raw_files",
    "load_arrays",
    "shard_size",
    "steps_per_epoch",
    "samples_per_epoch",
    "epoch_indices",
    "make_dataset",
    "make_epochs_dataset",
    "distribute_for_strategy",
]

TRAIN_SIZE = 60_000
TEST_SIZE = 10_000
NUM_CLASSES = 10
CLASS_NAMES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
#: sha256 of the DECOMPRESSED IDX files (identical for Debian's and upstream's .gz).
IDX_SHA256: dict[str, str] = {
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
}
#: Folders searched after ``$COURSE_DATA_DIR`` (``~`` is expanded at search time).
SYSTEM_DATA_DIRS: list[str] = ["/usr/share/datasets/fashion-mnist", "~/.keras/datasets/fashion-mnist"]
# gzip header mtimes of the upstream (zalando / tfds) .gz files.
_UPSTREAM_MTIME = {"train": 1504176606, "t10k": 1504176627}
_GET_DATA_HINT = (
    "Get the data with `sudo apt-get install dataset-fashion-mnist`, or set COURSE_DATA_DIR to a "
    "folder holding the four files (t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz, "
    "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz), or run online so that tfds/keras "
    "download them."
)


class DataError(RuntimeError):
    """The Fashion-MNIST data could not be found, verified or loaded."""


class DataNotFoundError(DataError, FileNotFoundError):
    """None of the searched folders holds the four raw Fashion-MNIST files."""


class DataCorruptError(DataError):
    """A raw file or a loaded array does not match the real Fashion-MNIST."""


class FashionMNIST(NamedTuple):
    """The four Fashion-MNIST arrays: uint8 images (N, 28, 28) and uint8 labels (N,)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


# --------------------------------------------------------------------------- raw files
def search_paths() -> list[Path]:
    """Folders searched for the raw ``.gz`` files, in order.

    Returns:
        ``$COURSE_DATA_DIR`` (if set), ``/usr/share/datasets/fashion-mnist``,
        ``~/.keras/datasets/fashion-mnist``.
    """
    paths: list[Path] = []
    env = os.environ.get("COURSE_DATA_DIR")
    if env:
        paths.append(Path(env).expanduser())
    paths.extend(Path(p).expanduser() for p in SYSTEM_DATA_DIRS)
    return paths


def find_raw_files() -> Path:
    """Return the first folder of :func:`search_paths` that holds all four ``<stem>.gz`` files.

    Returns:
        The folder.

    Raises:
        DataNotFoundError: If no folder holds all four files; the message names every path
            searched and how to get the data.
    """
    searched = search_paths()
    for folder in searched:
        if all((folder / f"{stem}.gz").is_file() for stem in IDX_SHA256):
            return folder
    listing = ", ".join(str(p) for p in searched)
    raise DataNotFoundError(f"Fashion-MNIST raw files not found; searched: {listing}. {_GET_DATA_HINT}")


def verify_raw_files(directory: Path | None = None) -> dict[str, str]:
    """Decompress each raw file and check its sha256 against :data:`IDX_SHA256`.

    Args:
        directory: Folder with the four ``.gz`` files; default :func:`find_raw_files`.

    Returns:
        ``{stem: sha256 of the decompressed bytes}``.

    Raises:
        DataNotFoundError: If ``directory`` is None and no folder holds the files, or a file is
            missing from ``directory``.
        DataCorruptError: Naming every file that cannot be decompressed or has a wrong sha256.
    """
    folder = find_raw_files() if directory is None else Path(directory)
    digests: dict[str, str] = {}
    bad: list[str] = []
    for stem, expected in IDX_SHA256.items():
        path = folder / f"{stem}.gz"
        if not path.is_file():
            raise DataNotFoundError(f"{path} is missing. {_GET_DATA_HINT}")
        try:
            digest = hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest()
        except (OSError, EOFError, zlib.error) as exc:
            bad.append(f"{path} (cannot be decompressed: {exc})")
            continue
        digests[stem] = digest
        if digest != expected:
            bad.append(f"{path} (sha256 {digest[:12]}…, expected {expected[:12]}…)")
    if bad:
        raise DataCorruptError(
            "Corrupt Fashion-MNIST file(s): " + "; ".join(bad)
            + ". Delete them and reinstall (`sudo apt-get install --reinstall dataset-fashion-mnist`) "
            "or copy intact files into COURSE_DATA_DIR."
        )
    return digests


def _upstream_gz(stem: str, raw: bytes) -> bytes:
    """Return ``raw`` (a .gz) with the upstream gzip header (FNAME flag, upstream mtime)."""
    if len(raw) < 10 or raw[:3] != b"\x1f\x8b\x08":
        raise DataCorruptError(f"{stem}.gz is not a gzip file")
    if raw[3] & 0x08:  # already carries a file name: upstream as is
        return raw
    if raw[3] != 0:
        raise DataCorruptError(f"{stem}.gz has unexpected gzip flags {raw[3]:#x}")
    mtime = _UPSTREAM_MTIME[stem.split("-")[0]]
    header = b"\x1f\x8b\x08\x08" + struct.pack("<I", mtime) + b"\x00\x03" + stem.encode() + b"\x00"
    return header + raw[10:]


def _tfds_upstream_sha256() -> dict[str, str]:
    """The upstream .gz sha256 that tfds checks, read from its own url_checksums file."""
    import tensorflow_datasets as tfds  # noqa: F401  (locate the installed package)

    path = Path(tfds.__file__).parent / "url_checksums" / "fashion_mnist.txt"
    sums: dict[str, str] = {}
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 4:
            sums[parts[3].strip()] = parts[2].strip()
    return sums


def _stage_tfds_manual(raw_dir: Path, manual_dir: Path) -> None:
    """Put upstream-identical .gz files into the tfds manual folder (atomic, verified)."""
    sums = _tfds_upstream_sha256()
    for stem in IDX_SHA256:
        name = f"{stem}.gz"
        target = manual_dir / name
        expected = sums.get(name)
        if expected is None:
            raise DataError(f"tfds has no checksum for {name}; is tensorflow-datasets 4.9.x installed?")
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
            continue
        data = _upstream_gz(stem, (raw_dir / name).read_bytes())
        got = hashlib.sha256(data).hexdigest()
        if got != expected:
            raise DataCorruptError(
                f"{raw_dir / name}: restoring the upstream gzip header gives sha256 {got[:12]}…, "
                f"tfds expects {expected[:12]}…. Run `python -m course_lib doctor`, or delete the "
                "tfds folder and run online."
            )
        atomic_write_bytes(target, data)


def _keras_cache_dir() -> Path:
    """Folder where TF 2.15's keras ``get_file`` looks for ``fashion-mnist/<stem>.gz``."""
    base = Path("~/.keras").expanduser()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    if not os.access(base, os.W_OK):  # same fallback as keras.utils.get_file
        base = Path("/tmp/.keras")
    return base / "datasets" / "fashion-mnist"


def _tfds_data_dir() -> Path:
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
def _load_tfds() -> FashionMNIST:
    import tensorflow_datasets as tfds

    data_dir = _tfds_data_dir()
    manual_dir = data_dir / "downloads" / "manual"
    builder = tfds.builder("fashion_mnist", data_dir=str(data_dir))
    try:
        if not builder.is_prepared():
            raw = _raw_dir_or_none()
            if raw is not None:
                _stage_tfds_manual(raw, manual_dir)
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
            f"{_GET_DATA_HINT} Or use load_arrays(source='keras')."
        ) from exc
    (x_train, y_train), (x_test, y_test) = tfds.as_numpy(splits)
    return FashionMNIST(x_train[..., 0], y_train, x_test[..., 0], y_test)


def _load_keras() -> FashionMNIST:
    import tensorflow as tf

    cache = _keras_cache_dir()
    raw = _raw_dir_or_none()
    if raw is not None and raw.resolve() != cache.resolve():
        for stem in IDX_SHA256:
            target = cache / f"{stem}.gz"
            if not target.exists():
                atomic_write_bytes(target, (raw / f"{stem}.gz").read_bytes())
    try:
        (x_train, y_train), (x_test, y_test) = tf.keras.datasets.fashion_mnist.load_data()
    except Exception as exc:
        raise DataError(f"keras could not load fashion_mnist: {type(exc).__name__}: {exc}. "
                        f"{_GET_DATA_HINT}") from exc
    return FashionMNIST(x_train, y_train, x_test, y_test)


def _check_loaded(data: FashionMNIST, source: str) -> None:
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


def load_arrays(source: str = "tfds", *, train_subset: int | None = None,
                test_subset: int | None = None) -> FashionMNIST:
    """Load the real Fashion-MNIST as numpy arrays, verified.

    Offline, the raw files found by :func:`find_raw_files` feed the real loaders: for tfds they
    are restored to the upstream bytes (gzip header) and placed in the tfds manual folder
    ``<data_dir>/downloads/manual`` (``data_dir`` = ``$COURSE_TFDS_DIR``, else ``$TFDS_DATA_DIR``,
    else ``~/tensorflow_datasets``); tfds prepares the dataset once (about 10 s). For keras they are
    copied to ``~/.keras/datasets/fashion-mnist`` when absent. Note that tfds stores the examples in
    its own (fixed, deterministic) order, which differs from the IDX order keras returns; both hold
    the same examples.

    Args:
        source: ``"tfds"`` (``tfds.load("fashion_mnist")``) or ``"keras"``
            (``tf.keras.datasets.fashion_mnist.load_data()``).
        train_subset: Keep only the FIRST ``train_subset`` training examples (None: all 60 000).
        test_subset: Keep only the FIRST ``test_subset`` test examples (None: all 10 000).

    Returns:
        A :class:`FashionMNIST` of uint8 arrays, images (N, 28, 28), labels (N,).

    Raises:
        ValueError: Unknown ``source`` or a subset outside 1..split size.
        DataError: The loader failed (the cause is in the message).
        DataCorruptError: The loaded arrays are not the real Fashion-MNIST (shape, count, labels).
    """
    loaders = {"tfds": _load_tfds, "keras": _load_keras}
    if source not in loaders:
        raise ValueError(f"source must be 'tfds' or 'keras', got {source!r}")
    for name, value, limit in (("train_subset", train_subset, TRAIN_SIZE),
                               ("test_subset", test_subset, TEST_SIZE)):
        if value is not None and (not isinstance(value, int) or not 1 <= value <= limit):
            raise ValueError(f"{name} must be an int in 1..{limit} or None, got {value!r}")
    data = loaders[source]()
    _check_loaded(data, source)
    data = FashionMNIST(*(np.asarray(a, dtype=np.uint8) for a in data))
    if train_subset is not None:
        data = data._replace(x_train=data.x_train[:train_subset], y_train=data.y_train[:train_subset])
    if test_subset is not None:
        data = data._replace(x_test=data.x_test[:test_subset], y_test=data.y_test[:test_subset])
    return data


# Pipelines live in course_lib.pipeline; they are re-exported here so `data.make_dataset` etc. work.
from course_lib.pipeline import (  # noqa: E402
    ShardError,
    distribute_for_strategy,
    epoch_indices,
    make_dataset,
    make_epochs_dataset,
    samples_per_epoch,
    shard_size,
    steps_per_epoch,
)
