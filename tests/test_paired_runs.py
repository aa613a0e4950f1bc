"""Tests of course_lib.lessons.common.paired_runs: runs compared in alternating rounds, epoch paired with epoch."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from course_lib.lessons.common import paired_runs, scaling
from course_lib.lessons.common.paired_runs import (Paired, launch_rate, launch_ratio, paired_ratio,
                                                  paired_scaling_table, speed_sentence, timed_rates)
from course_lib.training.stats import mean_ci95


def run(workers: int, rates: list[float], *, label: str | None = None, warmup: float = 100.0):
    """A fake RunResult: one warm-up epoch, then the timed ones."""
    epochs = [{"epoch": 1, "images_per_sec": warmup, "warmup": True}]
    epochs += [{"epoch": i + 2, "images_per_sec": r, "warmup": False} for i, r in enumerate(rates)]
    if label:
        epochs = [{**e, "run": label} for e in epochs]
    return SimpleNamespace(epochs=epochs, result={"per_worker_batch": 64, "global_batch": 64 * workers})


def test_timed_rates_leave_out_warmup_and_pick_a_run_by_name() -> None:
    pair = SimpleNamespace(epochs=run(1, [5.0, 6.0], label="first").epochs + run(2, [7.0], label="second").epochs)
    assert timed_rates(pair, "first") == [5.0, 6.0] and timed_rates(pair, "second") == [7.0]
    with pytest.raises(ValueError, match="no timed epoch named 'other'"):
        timed_rates(pair, "other")


def bound_run(*copies: list[float]):
    """A fake bound launch: copy i reports its own epochs, tagged with its index (as run_bound's events are)."""
    events = [(i, {"event": "epoch", **e}) for i, rates in enumerate(copies) for e in run(1, rates).epochs]
    return SimpleNamespace(events=events, epochs=[e for i, e in events if i == 0])


def test_a_bound_launch_sums_its_copies_epoch_by_epoch() -> None:
    bound = bound_run([10.0, 12.0], [11.0, 9.0])
    assert timed_rates(bound) == [21.0, 21.0] and launch_rate(bound) == 21.0
    with pytest.raises(ValueError, match="same epochs"):
        timed_rates(bound_run([10.0, 12.0], [11.0]))


def test_launch_ratio_takes_one_sample_per_round_and_refuses_a_launch_used_twice() -> None:
    a1, b1, a2, b2 = run(2, [20.0, 22.0]), run(1, [10.0, 10.0]), run(2, [30.0, 30.0]), run(1, [20.0, 20.0])
    ratio = launch_ratio([(a1, b1), (a2, b2)])
    assert (ratio.pairs, ratio.unit, ratio.samples()) == (2, "rounds", "2 rounds")
    assert ratio.mean == pytest.approx((2.1 + 1.5) / 2) and ratio.ci95 == pytest.approx(mean_ci95([2.1, 1.5])[1])
    with pytest.raises(ValueError, match="two rounds"):
        launch_ratio([(a1, b1), (a1, b2)])      # the epochs of one launch would count as independent samples
    with pytest.raises(ValueError, match="itself"):
        launch_ratio([(a1, a1)])


def test_paired_ratio_pools_the_pairs_of_every_round() -> None:
    ratio = paired_ratio([([2.0, 4.0], [1.0, 2.0]), ([3.0, 3.0], [2.0, 1.0])])
    expected = mean_ci95([2.0, 2.0, 1.5, 3.0])
    assert ratio == Paired(expected[0], expected[1], 4)
    with pytest.raises(ValueError, match="same number of timed epochs"):
        paired_ratio([([1.0, 2.0], [1.0])])
    with pytest.raises(ValueError, match="positive"):
        paired_ratio([([1.0], [0.0])])


def test_pairing_cancels_a_drift_that_moves_both_sides() -> None:
    """A machine slowing down round after round: the launches' spread is large, the ratio paired by round's is 0."""
    rounds = [{1: run(1, [100.0 * s, 100.0 * s]), 2: run(2, [160.0 * s, 160.0 * s])} for s in (1.0, 0.5)]
    table = paired_scaling_table(rounds)
    two = table.set_index("devices").loc[2]
    assert two["speedup"] == pytest.approx(1.6) and two["efficiency"] == pytest.approx(0.8)
    assert two["efficiency_ci95"] == pytest.approx(0.0, abs=1e-12) and two["rounds"] == 2 and two["runs"] == 2
    assert two["images_per_sec_ci95"] > 50   # the drift is in the pooled images/s, not in the paired ratio
    one = table.set_index("devices").loc[1]
    assert (one["speedup"], one["efficiency"], one["efficiency_ci95"]) == (1.0, 1.0, 0.0)
    assert list(table["mode"]) == ["weak", "weak"] and list(table["global_batch"]) == [64, 128]
    scaling.plot_scaling(table)   # the table draws like scaling_table's


def test_scaling_table_needs_a_one_worker_run_in_every_round() -> None:
    with pytest.raises(ValueError, match="1-worker run"):
        paired_scaling_table([{2: run(2, [1.0])}])


@pytest.mark.parametrize(("ratios", "words"), [
    ([1.2, 1.25, 1.22], "A is faster here"),
    ([0.8, 0.82, 0.79], "A is slower here"),
    ([0.9, 1.2, 1.0], "cannot tell which is faster here"),
])
def test_speed_sentence_follows_its_verdict(ratios: list[float], words: str) -> None:
    """The sentence that states the measured effect changes with the measurement: each verdict flips it."""
    ratio = paired_ratio([(ratios, [1.0] * len(ratios))], unit="rounds")
    sentence = speed_sentence("A", "B", ratio)
    assert sentence.startswith("measured: A against B: ≈") and sentence.endswith(words), sentence
    assert f"({len(ratios)} rounds)" in sentence


def test_one_pair_cannot_tell() -> None:
    one = paired_ratio([([2.0], [1.0])])
    assert math.isnan(one.ci95) and one.at_least(1.0) == "cannot tell"
    assert speed_sentence("A", "B", one).endswith("cannot tell which is faster here")
    assert paired_runs.Paired(1.1, 0.05, 8).at_least(1.0) == "True"
