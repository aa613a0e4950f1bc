"""Self-check of notebook 01's coding exercise: the learner's ring all-reduce.

:func:`check_ring_allreduce` (``01.ring_allreduce``) runs the learner's ring on arrays it draws and compares
every worker's result with the sum it computes from the same arrays; nothing is stored. It prints and returns
its verdict the one way :mod:`course_lib.lessons.common.checks` defines.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from course_lib.lessons.common.checks import learner_call, right, wrong

__all__ = ["check_ring_allreduce"]


def check_ring_allreduce(ring: Callable[[list[Any]], list[Any]], *, seed: int = 0) -> bool:
    """Self-check of the coding exercise of notebooks/01_data_parallelism.ipynb: finish a ring all-reduce.

    ``ring(arrays)`` is the learner's function: one 1-D array per worker in, one array per worker out.
    The check draws random arrays for 2, 3, 4 and 5 workers, of lengths that N divides and that it
    does not (uneven chunks), and wants every worker to end with the element-wise sum, computed here
    from the same arrays. An all-gather that adds instead of replacing, a wrong chunk index or a step
    too few leaves some worker with a wrong chunk, which the check names.

    Args:
        ring: The learner's function.
        seed: Seed of the arrays.

    Returns:
        True when every worker holds the sum for every N tried.
    """
    key = "01.ring_allreduce"
    rng = np.random.default_rng(seed)
    for workers in (2, 3, 4, 5):
        for length in (2 * workers, 2 * workers + 1):
            arrays = [rng.normal(size=length) for _ in range(workers)]
            expected = np.sum(arrays, axis=0)
            ran, results = learner_call(key, ring, [a.copy() for a in arrays], what="ring",
                                         placeholder="not written yet — finish my_ring_allreduce in the cell "
                                         "above and run both cells.")
            if not ran:
                return False
            if results is None or len(results) != workers:
                return wrong(key, f"with {workers} workers your function returned "
                             f"{'nothing' if results is None else len(results)} arrays.", "return one per worker")
            for w, got in enumerate(results):
                got = np.asarray(got, dtype=float)
                if got.shape != expected.shape or not np.allclose(got, expected):
                    bad = (np.flatnonzero(~np.isclose(got, expected)) if got.shape == expected.shape
                           else "its shape")
                    return wrong(key, f"with {workers} workers and arrays of {length}, worker {w} is wrong at "
                                 f"positions {bad}.", "trace N = 3 by hand: which chunk is finished on each worker "
                                 "after the reduce-scatter, which one does it send first, and does the receiver add "
                                 "it or keep it")
    return right(key, "every worker holds the sum, for 2 to 5 workers and uneven chunks")
