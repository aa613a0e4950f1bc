"""The idioms a learner must carry away are written out in notebook cells; the library keeps the
production versions. These tests run the cell versions, read from the committed notebooks, and check
that they agree with the library (issue 30: the idioms in cells).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from course_lib.lessons.data_parallelism import concepts

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def cell_function(notebook: str, name: str):
    """The function ``name`` as a notebook's cell defines it (only the ``def``, not the cell's other lines)."""
    nb = nbformat.read(NOTEBOOKS / notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or f"def {name}(" not in cell.source:
            continue
        tree = ast.parse(cell.source)
        node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        namespace = {"np": np, "pd": pd}
        exec(compile(ast.Module([node], []), f"{notebook}:{name}", "exec"), namespace)  # noqa: S102
        return namespace[name], node.end_lineno - node.lineno + 1
    raise AssertionError(f"no code cell of {notebook} defines {name}()")


def test_01_defines_a_readable_ring_allreduce() -> None:
    _, lines = cell_function("01_data_parallelism.ipynb", "ring_allreduce_by_hand")
    assert lines <= 25, f"the ring in 01 has {lines} lines; a learner should read it in one screen (<= 25)"


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("length", [8, 13])
def test_01_cell_ring_agrees_with_the_library(workers: int, length: int) -> None:
    ring, _ = cell_function("01_data_parallelism.ipynb", "ring_allreduce_by_hand")
    rng = np.random.default_rng(workers * 100 + length)
    arrays = [rng.normal(size=length) for _ in range(workers)]
    results, trace = ring(arrays)
    library = concepts.ring_allreduce(arrays)
    for mine, theirs in zip(results, library.results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)
    np.testing.assert_allclose(results[0], np.sum(arrays, axis=0), rtol=1e-12)
    assert len(trace) == library.steps == 2 * (workers - 1)
    if workers > 1:
        assert list(trace["phase"]).count("reduce-scatter") == workers - 1
        fig = concepts.plot_ring_trace(trace)
        assert len(fig.axes[0].texts) == workers * len(trace)   # one label per worker and step


def test_ring_picture_refuses_an_empty_trace() -> None:
    with pytest.raises(ValueError, match="one worker has nothing to send"):
        concepts.plot_ring_trace(pd.DataFrame([]))
