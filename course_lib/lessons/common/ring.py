"""The ring all-reduce's traffic per worker, the one formula notebooks 01 and 05 share.

Notebook 01 derives ``2 (N - 1) / N`` by counting what its simulated ring sends
(:mod:`course_lib.lessons.data_parallelism.concepts`); notebook 05 fits measured all-reduce times to the
alpha-beta model built on it (:mod:`course_lib.lessons.communication.allreduce_model`). Both take it from here.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ring_factor"]


def ring_factor(workers: int) -> float:
    """Bytes each worker sends per byte of gradient in a ring all-reduce: ``2 (N - 1) / N``.

    The course's one statement of the formula:
    :func:`course_lib.lessons.data_parallelism.concepts.allreduce_cost_table` (notebook 01) and
    :mod:`course_lib.lessons.communication.allreduce_model` (notebook 05) use it.

    Raises:
        ValueError: If ``workers`` is not an int >= 1.
    """
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers={workers!r} must be an int >= 1, e.g. 2")
    return 2 * (int(workers) - 1) / int(workers)
