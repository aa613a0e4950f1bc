"""Tests of benchmarks/step_cost.py (section 10s: what the all-reduce adds to a step), on synthetic rounds."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import step_cost  # noqa: E402


def test_rounds_are_sized_for_the_effect():
    assert step_cost.rounds_for(10.0, 5.0) == step_cost.ROUNDS == 18   # the declared count follows from the rule
    assert step_cost.rounds_for(5.0, 5.0) == 7
    assert step_cost.rounds_for(0.0, 5.0) == 2
    with pytest.raises(ValueError, match="more than"):
        step_cost.rounds_for(100.0, 1.0, most=20)


@pytest.mark.parametrize("offsets, verdict", [([10.0, 12.0, 9.0, 11.0], "slower"),
                                              ([-10.0, -12.0, -9.0, -11.0], "faster"),
                                              ([10.0, -12.0, 9.0, -8.0], "cannot tell")])
def test_the_difference_is_paired_by_round_and_decided_on_its_interval(offsets, verdict):
    without = [100.0, 90.0, 110.0, 95.0]                    # rounds drift; the pairing removes it
    samples = {"with": [w + d for w, d in zip(without, offsets)], "without": without}
    *_, diff = step_cost.rows(samples)
    assert diff.value == pytest.approx(sum(offsets) / 4) and diff.n == 4
    assert diff.note.startswith(verdict + ";")


def test_a_failed_launch_drops_its_round_only():
    samples = {"with": [110.0, math.nan, 105.0], "without": [100.0, 95.0, 96.0]}
    with_row, without_row, diff = step_cost.rows(samples)
    assert diff.n == 2 and without_row.n == 2 and diff.value == pytest.approx(9.5)


def test_a_launch_s_step_time_leaves_the_warm_up_epoch_out():
    epochs = [{"step_time_ms": 900.0, "warmup": True}, {"step_time_ms": 100.0}, {"step_time_ms": 110.0}]
    assert step_cost._step_ms(epochs) == pytest.approx(105.0)
    assert math.isnan(step_cost._step_ms([{"step_time_ms": 1.0, "warmup": True}]))
