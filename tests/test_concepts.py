"""The concept simulations of notebook 01 are exact."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.lessons.data_parallelism.concepts import (allreduce_cost_table, ring_allreduce,
                                                          synchronous_vs_asynchronous)


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
def test_ring_allreduce_sums_and_sends_2_n_minus_1_over_n(workers: int) -> None:
    rng = np.random.default_rng(workers)
    size = 84  # divisible by 1, 2, 3, 4, 7
    arrays = [rng.normal(size=size) for _ in range(workers)]
    result = ring_allreduce(arrays)
    expected = np.sum(arrays, axis=0)
    for held in result.results:
        np.testing.assert_allclose(held, expected)
    assert result.elements_sent == [2 * (workers - 1) * size // workers] * workers
    assert result.steps == 2 * (workers - 1)


def test_ring_allreduce_uneven_chunks_and_bad_input() -> None:
    arrays = [np.arange(10.0) * (w + 1) for w in range(3)]
    np.testing.assert_allclose(ring_allreduce(arrays).results[2], np.arange(10.0) * 6)
    with pytest.raises(ValueError, match="one length"):
        ring_allreduce([np.zeros(4), np.zeros(5)])
    with pytest.raises(ValueError, match="cannot be cut"):
        ring_allreduce([np.zeros(2)] * 3)
    with pytest.raises(ValueError, match="at least one"):
        ring_allreduce([])


def test_cost_table() -> None:
    table = allreduce_cost_table(4.0, workers=(1, 2, 8))
    assert table["ring_mb_per_worker"].tolist() == [0.0, 4.0, 7.0]
    assert table["ps_mb_sent_by_server"].tolist() == [0.0, 8.0, 32.0]
    assert table["ring_messages"].tolist() == [0, 2, 14]           # 2 (N - 1): the latency term
    # sends only, as the ring's column and the notebook's prose count them (issue 52: it was 2 N, sends + receives)
    assert table["ps_messages_sent_by_server"].tolist() == [0, 2, 8]


def test_straggler_costs_synchronous_training() -> None:
    table = synchronous_vs_asynchronous([0.1, 0.1, 0.2], steps=10).set_index("scheme")
    assert table.loc["synchronous", "updates_per_s"] == pytest.approx(5.0)
    assert table.loc["asynchronous", "updates_per_s"] == pytest.approx(25.0)
    # Mean staleness is N - 1 whatever the step times; the slow worker's gradients are staler.
    assert table.loc["asynchronous", "mean_staleness"] == pytest.approx(2.0)
    assert table.loc["asynchronous", "max_staleness"] == pytest.approx((25.0 - 5.0) * 0.2)
    even = synchronous_vs_asynchronous([0.1] * 4).set_index("scheme")
    assert even.loc["asynchronous", "max_staleness"] == pytest.approx(3.0)
    assert table.loc["synchronous", "max_staleness"] == 0.0
    with pytest.raises(ValueError):
        synchronous_vs_asynchronous([0.1, 0.0])
