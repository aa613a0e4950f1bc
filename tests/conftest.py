"""Shared fixtures (the real Fashion-MNIST, loaded once per session) and the no-silent-skip rule.

The loaders run with a temporary HOME / TFDS_DATA_DIR (restored right after loading), so the
tests neither depend on nor pollute an existing cache.

No silent skips (issue 20): a test that needs a component says so with
``@pytest.mark.requires("horovodrun")`` (see :data:`COMPONENTS`); a missing component FAILS the
test with the remedy. Any other skip also fails, unless its reason starts with one of
:data:`ALLOWED_SKIPS` (only what this machine cannot have, such as a GPU). To leave a group of
tests out on purpose, deselect it (``make test-unit`` runs ``-m "not horovod and not browser"``):
deselected tests are counted in pytest's summary, never reported as passed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterator

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


# ----------------------------------------------------------------- no silent skips
#: Skip reasons that do not fail the run: things a correctly set-up machine may lack. Each needs a
#: CPU run of the same code path elsewhere (mixed precision: tests/test_gpu_paths_on_cpu.py).
ALLOWED_SKIPS: tuple[str, ...] = ("needs a GPU",)


def _horovodrun_found() -> bool:
    return (Path(sys.executable).parent / "horovodrun").exists() or shutil.which("horovodrun") is not None


#: Components a test may require: (is it there?, remedy printed when it is not).
COMPONENTS: dict[str, tuple[Callable[[], bool], str]] = {
    "horovodrun": (_horovodrun_found,
                   "horovodrun is not installed next to this Python: run `make setup` "
                   "(COURSE_FORCE_SETUP=1 make setup rebuilds Horovod)"),
    "horovod": (lambda: importlib.util.find_spec("horovod") is not None,
                "the horovod package is not importable: run `make setup`"),
    "tensorflow_addons": (lambda: importlib.util.find_spec("tensorflow_addons") is not None,
                          "tensorflow-addons (the LAMB/LARS reference) is missing: run `make setup`"),
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires(*components): the test fails (never skips) with the "
                            "remedy when a component is missing; components: " + ", ".join(COMPONENTS))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail, with the remedy, a test whose required component is missing."""
    for mark in item.iter_markers("requires"):
        for name in mark.args:
            if name not in COMPONENTS:
                pytest.fail(f"unknown component {name!r} in @pytest.mark.requires; known: "
                            f"{', '.join(COMPONENTS)}", pytrace=False)
            present, remedy = COMPONENTS[name]
            if not present():
                pytest.fail(f"required component missing: {remedy}", pytrace=False)


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason text of a skipped report ("" when pytest recorded none)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def _fail_unless_allowed(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if reason.startswith(ALLOWED_SKIPS):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped without an allowed reason: {reason!r}. In `make test` a missing "
                       "component is a failure: install it (`make setup`), or deselect the tests on "
                       "purpose (-m / --deselect). Allowed skip reasons (tests/conftest.py "
                       f"ALLOWED_SKIPS): {', '.join(ALLOWED_SKIPS)}.")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Turn a test's skip into a failure unless its reason is allowed."""
    report = yield
    _fail_unless_allowed(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Turn a skipped module (``pytest.importorskip``, ``allow_module_level``) into a failure too."""
    report = yield
    _fail_unless_allowed(report)
    return report
