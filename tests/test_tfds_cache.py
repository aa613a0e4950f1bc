"""The verified NumPy copy of tfds' arrays (course_lib.training.tfds_cache): used, checked, never stale."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from course_lib.training import data, tfds_cache


@pytest.fixture
def data_dir(fmnist_tfds, tfds_home, tmp_path) -> Path:
    """A private copy of the prepared tfds folder (modification times kept), used by load_arrays."""
    target = tmp_path / "tensorflow_datasets"
    shutil.copytree(tfds_home / "tensorflow_datasets" / "fashion_mnist", target / "fashion_mnist")
    for stale in (target / "fashion_mnist").glob("course-arrays-*.npz"):
        stale.unlink()
    return target


def _same(a: data.FashionMNIST, b: data.FashionMNIST) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def _store(data_dir: Path, fmnist_tfds: data.FashionMNIST) -> Path:
    """Write the verified copy as a load does after decoding, without decoding tfds' images again
    (issue 31: the load that writes it is tested once, in the first test)."""
    path = tfds_cache.store(data_dir, {k: np.asarray(v, dtype=np.uint8) for k, v in fmnist_tfds._asdict().items()})
    assert path is not None and tfds_cache.lookup(data_dir) is not None
    return path


def test_a_load_writes_the_copy_and_the_next_load_reads_it(fmnist_tfds, tfds_home, monkeypatch):
    """The load that writes the copy is the session's ``fmnist_tfds`` load itself (tests/conftest.py: tfds
    prepared and decoded in a fresh folder); issue 31: a second decoding of tfds' 70 000 images here proved
    nothing more. tests/test_tfds_cache.py::test_an_altered_copy_is_ignored_and_replaced decodes tfds again
    and sees the copy rewritten."""
    data_dir = tfds_home / "tensorflow_datasets"
    path = tfds_cache.cache_path(data_dir)
    assert path is not None and path.is_file() and path.stat().st_mode & 0o004
    assert tfds_cache.lookup(data_dir) is not None
    # The second load must not touch tfds at all: make tfds unusable and load again.
    import builtins
    real_import = builtins.__import__

    def no_tfds(name, *args, **kwargs):
        if name.startswith("tensorflow_datasets"):
            raise AssertionError("tfds was imported although a verified copy exists")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_tfds)
    assert _same(data.load_arrays("tfds", data_dir=data_dir), fmnist_tfds)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_an_altered_copy_is_ignored_and_replaced(data_dir, fmnist_tfds):
    path = _store(data_dir, fmnist_tfds)
    with np.load(path) as npz:
        arrays = {k: npz[k].copy() for k in npz.files}
    arrays["x_test"][7, 14, 14] ^= 1
    np.savez(path, **arrays)
    assert tfds_cache.lookup(data_dir) is None  # one flipped pixel: not used
    assert _same(data.load_arrays("tfds", data_dir=data_dir), fmnist_tfds)  # tfds again, verified, and the copy rewritten
    assert tfds_cache.lookup(data_dir) is not None


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_a_changed_record_file_changes_the_key(data_dir, fmnist_tfds):
    before = _store(data_dir, fmnist_tfds)
    [shard] = (data_dir / "fashion_mnist").glob("*/fashion_mnist-test.tfrecord*")
    stat = shard.stat()
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert tfds_cache.cache_path(data_dir) != before
    assert tfds_cache.lookup(data_dir) is None


def test_wrong_content_is_never_stored_and_a_read_only_folder_is_no_error(data_dir, fmnist_tfds):
    arrays = fmnist_tfds._asdict()
    wrong = {**arrays, "y_train": arrays["y_train"][::-1].copy()}  # same examples, another order
    assert tfds_cache.store(data_dir, wrong) is None
    folder = data_dir / "fashion_mnist"
    folder.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root writes anyway: make the write itself fail instead
            folder.chmod(0o755)
            (folder / "blocker").mkdir()
            os.replace(folder / "blocker", folder / tfds_cache.cache_path(data_dir).name)
        assert tfds_cache.store(data_dir, arrays) is None
    finally:
        folder.chmod(0o755)
