"""Fashion-MNIST's raw files: where they are, whether they are intact, and staging them for tfds.

The raw IDX ``.gz`` files found on disk (Debian package ``dataset-fashion-mnist``, or
``$COURSE_DATA_DIR``) are verified by the sha256 of their decompressed bytes, and handed to tfds
through its manual-download folder with the upstream gzip header restored (so that tfds's own
checksums match byte for byte).

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import zlib
from pathlib import Path

from course_lib.training.files import atomic_write_bytes

__all__ = [
    "IDX_SHA256",
    "IDX_HEADER_BYTES",
    "SORTED_ROWS_SHA256",
    "TFDS_ARRAYS_SHA256",
    "SYSTEM_DATA_DIRS",
    "GET_DATA_HINT",
    "DataError",
    "DataNotFoundError",
    "DataCorruptError",
    "search_paths",
    "find_raw_files",
    "verify_raw_files",
    "stage_tfds_manual",
]

#: sha256 of the DECOMPRESSED IDX files (identical for Debian's and upstream's .gz).
IDX_SHA256: dict[str, str] = {
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
}
#: Length of each IDX header (magic number and dimensions) before the uint8 data.
IDX_HEADER_BYTES: dict[str, int] = {"images": 16, "labels": 8}
#: sha256 of each split's examples in sorted order (row = 784 pixel bytes + 1 label byte, rows sorted
#: bytewise): an order-free digest of the same IDX content, for loaders (tfds) that reorder examples.
#: Computed from the four files of :data:`IDX_SHA256`; tests/test_data.py recomputes it from them.
# sha256 of each array exactly as tfds 4.9 returns it (its own fixed order; course_lib.training.tfds_cache
# checks its NumPy copy against these).
TFDS_ARRAYS_SHA256: dict[str, str] = {
    "x_train": "d6f7acb83157a75006f04dbae6822f88b1bb1651cef953707c39831d938776a3",
    "y_train": "d9cabb237f24364b504cbbac96fd14c13e12dfb57fe27ee9e1c469b4539a4b4c",
    "x_test": "a84f70bc4eaa1b2c5e671e99525a60f9dbe89328fa62013e4aa30ba11800c4df",
    "y_test": "23f3e82766329d177b7800d1745a355d60ee8031a5c5a684fea01b1983f2d170",
}
SORTED_ROWS_SHA256: dict[str, str] = {
    "train": "4bc58f5926b1420d49344d02d6e71205a6644e54f0d302bc45b3918681b3998e",
    "t10k": "81875622ad6afb3e0bbaab6b5725f6f1d7759c18ac59f6306006d04c25bd7d29",
}
#: Folders searched after ``$COURSE_DATA_DIR`` (``~`` is expanded at search time).
SYSTEM_DATA_DIRS: list[str] = ["/usr/share/datasets/fashion-mnist", "~/.keras/datasets/fashion-mnist"]
# gzip header mtimes of the upstream (zalando / tfds) .gz files.
_UPSTREAM_MTIME = {"train": 1504176606, "t10k": 1504176627}
GET_DATA_HINT = (
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
    raise DataNotFoundError(f"Fashion-MNIST raw files not found; searched: {listing}. {GET_DATA_HINT}")


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
            raise DataNotFoundError(f"{path} is missing. {GET_DATA_HINT}")
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


def stage_tfds_manual(raw_dir: Path, manual_dir: Path) -> None:
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
