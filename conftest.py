"""pytest for the whole course: the notebooks' harness joins the session whenever nbval runs.

The harness (stderr checks, the learner tail, the notebooks' scheduling, the busy neighbour) lives in
``tests/notebooks/harness.py``, beside ``sanitize.cfg`` and ``stderr_allow.txt``, so that ``notebooks/`` holds
the lessons only. A pytest run without nbval (``-p no:nbval``: tests/nested_pytest.py) does not load it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent / "tests" / "notebooks" / "harness.py"


def pytest_configure(config: pytest.Config) -> None:
    """Register the notebooks' harness as a plugin when nbval is loaded and on (``--nbval``)."""
    if not config.pluginmanager.hasplugin("nbval") or not config.getoption("nbval", default=False):
        return
    if config.pluginmanager.has_plugin("course-notebook-harness"):
        return
    spec = importlib.util.spec_from_file_location("course_notebook_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    config.pluginmanager.register(harness, "course-notebook-harness")
