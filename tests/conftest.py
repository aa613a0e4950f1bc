"""Shared fixtures: the real Fashion-MNIST, loaded once per test session.

The loaders run with a temporary HOME / TFDS_DATA_DIR (restored right after loading), so the
tests neither depend on nor pollute an existing cache.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _load(source: str, home) -> object:
    from course_lib.training import data

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("TFDS_DATA_DIR", str(home / "tensorflow_datasets"))
        mp.delenv("COURSE_TFDS_DIR", raising=False)
        return data.load_arrays(source)


@pytest.fixture(scope="session")
def fmnist(tmp_path_factory):
    """The full real Fashion-MNIST via the keras loader (IDX order), from a fresh cache."""
    return _load("keras", tmp_path_factory.mktemp("keras_home"))


@pytest.fixture(scope="session")
def tfds_home(tmp_path_factory):
    """A fresh HOME whose ``tensorflow_datasets`` folder the ``fmnist_tfds`` load prepared."""
    return tmp_path_factory.mktemp("tfds_home")


@pytest.fixture(scope="session")
def fmnist_tfds(tfds_home):
    """The full real Fashion-MNIST via tfds, prepared (~10-30 s) in a fresh data_dir."""
    return _load("tfds", tfds_home)


@pytest.fixture(scope="session")
def small_fmnist(fmnist):
    """The first 2 000 training and 500 test examples of the real data."""
    from course_lib.training.data import FashionMNIST

    return FashionMNIST(fmnist.x_train[:2000], fmnist.y_train[:2000],
                        fmnist.x_test[:500], fmnist.y_test[:500])
