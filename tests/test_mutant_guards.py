"""Tests that kill the mutants of tools/maintainers/mutants.py in modules whose own test files other people own.

Expected values are derived here independently of the code under test (closed forms, or the ring
simulation checked against the cost table), so a factor slipped into either side fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.lessons.common.answers import Exercise
from course_lib.lessons.data_parallelism import concepts


# ---------------------------------------------------------------- staleness (concepts.synchronous_vs_asynchronous)
@pytest.mark.parametrize("workers", [2, 4, 8])
def test_equal_workers_see_n_minus_1_updates_of_staleness(workers: int) -> None:
    # While one worker computes a gradient, each of the N - 1 others applies exactly one update.
    table = concepts.synchronous_vs_asynchronous([0.5] * workers).set_index("scheme")
    assert table.loc["asynchronous", "mean_staleness"] == pytest.approx(workers - 1)
    assert table.loc["asynchronous", "max_staleness"] == pytest.approx(workers - 1)
    assert table.loc["synchronous", "mean_staleness"] == 0.0


def test_straggler_staleness_by_hand() -> None:
    # Step times 1 s and 2 s: during the fast worker's 1 s step the slow one applies 0.5 updates;
    # during the slow 2 s step the fast one applies 2. Weighted by each worker's share of the
    # updates (2/3, 1/3): 0.5 * 2/3 + 2 * 1/3 = 1. The slowest worker's gradients: 2 updates old.
    table = concepts.synchronous_vs_asynchronous([1.0, 2.0]).set_index("scheme")
    assert table.loc["asynchronous", "mean_staleness"] == pytest.approx(1.0)
    assert table.loc["asynchronous", "max_staleness"] == pytest.approx(2.0)
    assert table.loc["asynchronous", "updates_per_s"] == pytest.approx(1.5)
    assert table.loc["synchronous", "updates_per_s"] == pytest.approx(0.5)


# ---------------------------------------------------------------- ring traffic (concepts.allreduce_cost_table)
@pytest.mark.parametrize("workers", [2, 3, 4, 8])
def test_cost_table_matches_the_simulated_ring(workers: int) -> None:
    size = 24 * workers  # elements of one gradient, split evenly into N chunks
    arrays = [np.full(size, float(rank + 1)) for rank in range(workers)]
    result = concepts.ring_allreduce(arrays)
    for reduced in result.results:
        assert np.allclose(reduced, workers * (workers + 1) / 2)
    (sent,) = set(result.elements_sent)  # every worker sends the same amount
    table = concepts.allreduce_cost_table(1.0, [workers]).iloc[0]
    assert table["ring_mb_per_worker"] == pytest.approx(sent / size)  # per MB of gradient
    assert table["ring_mb_per_worker"] == pytest.approx(2 * (workers - 1) / workers)
    assert table["ring_messages"] == 2 * (workers - 1)
    assert table["ps_mb_sent_by_server"] == pytest.approx(workers)


def test_ring_traffic_of_a_4_mb_gradient_on_8_workers_is_7_mb() -> None:
    assert concepts.allreduce_cost_table(4.0, [8]).iloc[0]["ring_mb_per_worker"] == pytest.approx(7.0)


# ---------------------------------------------------------------- checkers reject near misses
# The checker_near_miss mutant (a self-check accepting a 0.9 % error) is killed here: the course's remaining
# exercises all take integer or word answers, so a "real" exercise is built for the test (its answer 7.25).
def test_a_real_answer_0_9_percent_off_is_wrong() -> None:
    real = Exercise("99.real", "{x}?", {"x": 7.25}, "real", "", solve=lambda x: x)
    assert real.accepts(7.25) and real.accepts(7.2507) and real.accepts("7.25")
    assert not real.accepts(7.25 * 1.009) and not real.accepts(7.25 * 0.991)
