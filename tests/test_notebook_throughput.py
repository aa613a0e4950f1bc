"""Notebook 01 writes an honest throughput callback out in a cell (issue 30: the idioms in cells); the
library keeps the production version, ``ThroughputMeter`` (the arithmetic of ``callbacks.Throughput``).
These tests run the cell's class, read from the committed notebook, on fake timings and check that it
reports the same images/s, epoch by epoch, as the library.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest

from course_lib.training.throughput import ThroughputMeter

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "01_data_parallelism.ipynb"
NAME = "HonestThroughput"


class _Callback:
    """Stands in for ``keras.callbacks.Callback`` (the hooks are plain methods; no TensorFlow needed)."""

    def __init__(self) -> None:
        self.model = None


def cell_class() -> tuple[Any, int]:
    """The class ``HonestThroughput`` as 01's cell defines it, and its number of lines."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or f"class {NAME}(" not in cell.source:
            continue
        tree = ast.parse(cell.source)
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == NAME)
        namespace: dict[str, Any] = {"keras": SimpleNamespace(callbacks=SimpleNamespace(Callback=_Callback)),
                                     "time": time}
        exec(compile(ast.Module([node], []), f"01:{NAME}", "exec"), namespace)  # noqa: S102
        return namespace[NAME], node.end_lineno - node.lineno + 1  # type: ignore[operator]
    raise AssertionError(f"no code cell of {NOTEBOOK.name} defines class {NAME}")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drive(callbacks: list[Any], clock: FakeClock, epochs: list[list[float]]) -> None:
    """Run Keras's hooks for ``epochs`` (each a list of step durations) on every callback at once."""
    for cb in callbacks:
        if hasattr(cb, "on_train_begin"):
            cb.on_train_begin()
    for epoch, steps in enumerate(epochs):
        clock.now += 0.013                      # time between epochs (evaluation, callbacks) is not counted
        for cb in callbacks:
            cb.on_epoch_begin(epoch, {})
        for step, dt in enumerate(steps):
            clock.now += dt
            for cb in callbacks:
                cb.on_train_batch_end(step, {})
        for cb in callbacks:
            cb.on_epoch_end(epoch, {})


def test_the_cell_callback_is_short() -> None:
    _, lines = cell_class()
    assert lines <= 20, f"01's HonestThroughput has {lines} lines; the brief is a callback of <= 20 lines"


@pytest.mark.parametrize(("batch", "cap", "epochs"), [
    (256, None, [[0.9] * 5, [0.11] * 5, [0.1, 0.12, 0.09, 0.1, 0.13]]),       # 01's run: 5 floored steps
    (100, 950, [[1.0] * 10, [0.1] * 10, [0.2] * 9 + [0.05]]),                # partial last batch: capped
    (64, None, [[0.5] * 3, [0.01] * 40, [0.02] * 40, [0.015] * 40, [0.03] * 7]),  # a short last epoch
])
def test_the_cell_callback_agrees_with_the_library(batch: int, cap: int | None,
                                                   epochs: list[list[float]]) -> None:
    honest, _ = cell_class()
    clock = FakeClock()
    mine = honest(batch, cap, clock=clock)
    meter = ThroughputMeter(batch, samples_per_epoch=cap, warmup_epochs=1, verbose=False, clock=clock,
                            measure_cpu=False)
    drive([mine, meter], clock, epochs)
    library = meter.summary().per_epoch
    assert len(mine.rates) == len(library) == len(epochs) - 1     # the first epoch is left out by both
    assert mine.rates == pytest.approx(library, rel=1e-12)


def test_the_cell_callback_counts_what_ran_not_the_data_set() -> None:
    honest, _ = cell_class()
    clock = FakeClock()
    mine = honest(1024, clock=clock)
    drive([mine], clock, [[1.0] * 5, [0.1] * 5])        # 5 steps of 1 024 in 0.5 s; the data set has 6 000
    assert mine.rates == pytest.approx([5 * 1024 / 0.5])
    assert mine.rates[0] < 6000 / 0.5                    # the bootcamp's count: data set size / epoch time
