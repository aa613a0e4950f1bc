"""Tests of course_lib.lessons.communication.alpha_parts: alpha taken apart from interleaved configurations, and
its checks."""

from __future__ import annotations

import math

import pytest

from course_lib.lessons.communication import alpha_parts
from course_lib.lessons.communication.transport import Figure


def _line(cycle, dispatch, rounds, nbytes=4096):
    return {"event": "allreduce", "cycle_time_ms": cycle, "dispatch": dispatch, "bytes": nbytes,
            "round_medians_s": rounds}


TWO = [_line(5.0, "eager", [9.0e-3, 9.2e-3, 8.8e-3]), _line(5.0, "function", [8.8e-3, 9.0e-3, 8.6e-3]),
       _line(0.1, "eager", [4.0e-3, 4.1e-3, 3.9e-3]), _line(0.1, "function", [3.6e-3, 3.7e-3, 3.5e-3])]
ONE = [_line(0.1, "eager", [0.30e-3, 0.31e-3, 0.29e-3]), _line(0.1, "function", [0.60e-3, 0.61e-3, 0.59e-3])]
WIRE = Figure(40e-6, 2e-6, 5)


def _parts():
    return alpha_parts.alpha_parts(TWO, ONE, transport=WIRE, hop_s=15e-6, nbytes=4096, cycle_ms=5.0,
                                   short_cycle_ms=0.1)


def test_parts_are_the_differences_of_one_change_each_and_add_up_to_alpha():
    parts = _parts()
    assert parts.alpha.seconds == pytest.approx(9.0e-3)
    assert parts.cycle_wait.seconds == pytest.approx(5.0e-3)          # 5 ms cycle - 0.1 ms cycle, eager
    assert parts.dispatch.seconds == pytest.approx(0.4e-3)            # eager - tf.function
    assert parts.one_rank.seconds == pytest.approx(0.6e-3)
    assert parts.between_ranks.seconds == pytest.approx(3.0e-3)       # two ranks - one, both in tf.function
    assert parts.negotiation.seconds == pytest.approx(3.0e-3 - 40e-6)
    assert parts.total().seconds == pytest.approx(parts.alpha.seconds)   # by construction
    # paired rounds: the cycle's differences are 5.0, 5.1, 4.9 ms: their own spread, not the runs'
    assert parts.cycle_wait.half_width_s == pytest.approx(4.303 * 0.1e-3 / math.sqrt(3))
    table = alpha_parts.parts_table(parts)
    assert table["part"].iat[-1] == "sum of the parts" and table["share"].iat[-1] == 1.0
    assert table["share"].iloc[:-1].sum() == pytest.approx(1.0)


def test_sum_check_can_come_out_false():
    parts = _parts()
    assert alpha_parts.sum_check(parts, Figure(9.1e-3, 1e-3, 3)) is True      # the sweep agrees
    assert alpha_parts.sum_check(parts, Figure(16e-3, 1e-3, 3)) is False      # the sweep saw far more
    assert alpha_parts.sum_check(parts, Figure(9e-3, math.nan, 1)) is None


def test_majority_flips_with_the_share():
    parts = _parts()
    assert alpha_parts.majority(parts, "cycle wait") is True                  # 5.0 of 9.0 ms
    assert alpha_parts.majority(parts, "transport (the same all-reduce without Horovod)") is False
    wide = alpha_parts.AlphaParts(**{**parts.__dict__, "cycle_wait": Figure(4.5e-3, 3e-3, 3)})
    assert alpha_parts.majority(wide, "cycle wait") is None                   # its interval holds one half


def test_missing_configuration_and_unpaired_rounds_are_named():
    with pytest.raises(KeyError, match="dispatch function"):
        alpha_parts.alpha_parts(TWO[:3], ONE, transport=WIRE, hop_s=1e-5, nbytes=4096, cycle_ms=5.0,
                                short_cycle_ms=0.1)
    with pytest.raises(ValueError, match="equal lengths"):
        alpha_parts.paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="round_medians_s"):
        alpha_parts.bench_figures([{"event": "allreduce", "cycle_time_ms": 5.0, "bytes": 4096}])
    assert set(alpha_parts.bench_figures(TWO)) == {(5.0, "eager", 4096), (5.0, "function", 4096),
                                                   (0.1, "eager", 4096), (0.1, "function", 4096)}


def _growth(three_rounds, hop_s=15e-6, cores=None):
    two = [[_line(0.1, "function", [3.6e-3, 3.7e-3, 3.5e-3])], [_line(0.1, "function", [3.7e-3, 3.6e-3, 3.5e-3])]]
    three = [[_line(0.1, "function", r)] for r in three_rounds]
    return alpha_parts.alpha_growth({2: two, 3: three}, hop_s=hop_s, cycle_ms=0.1, dispatch="function", nbytes=4096,
                                   cores=cores)


def test_alpha_at_3_processes_is_judged_against_the_ring_s_extra_hops():
    """Each verdict of the 2-vs-3-process comparison, and the sentence it chooses (issue 46)."""
    far = _growth([[6.0e-3, 6.2e-3, 5.9e-3], [6.1e-3, 6.0e-3, 6.2e-3]])       # +2.5 ms: far beyond 30 µs of hops
    assert far.growth.seconds == pytest.approx(6.067e-3 - 3.6e-3, abs=1e-6) and far.hops_s == pytest.approx(30e-6)
    assert far.beyond_hops() is True and far.sentence().endswith("more than the wire adds: the rest is waiting")
    crowded = _growth([[6.0e-3, 6.2e-3, 5.9e-3], [6.1e-3, 6.0e-3, 6.2e-3]], cores=2)
    assert crowded.sentence().endswith("the rest is waiting (3 ranks on 2 cores take turns)")
    assert "take turns" not in _growth([[6.0e-3, 6.2e-3, 5.9e-3]] * 2, cores=4).sentence()
    same = _growth([[3.6e-3, 3.7e-3, 3.6e-3], [3.5e-3, 3.7e-3, 3.6e-3]])      # no growth: cannot tell from 30 µs
    assert same.beyond_hops() is None and same.sentence().endswith("cannot tell it from the wire's extra hops")
    less = _growth([[3.60e-3, 3.60e-3, 3.60e-3], [3.60e-3, 3.60e-3, 3.60e-3]], hop_s=2e-3)   # hops of 4 ms: less
    assert less.beyond_hops() is False and "less than" in less.sentence()
    assert far.sentence().startswith("measured: α is 3.60 ± ") and "≈ 0.030 ms on this transport" in far.sentence()
    with pytest.raises(ValueError, match="2 and 3 processes"):
        alpha_parts.alpha_growth({2: []}, hop_s=1e-5, cycle_ms=0.1, dispatch="function", nbytes=4096)
