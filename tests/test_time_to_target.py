"""Tests of course_lib.lessons.large_batch.time_to_target (synthetic trials, exact arithmetic)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from course_lib.lessons.large_batch import time_to_target
from course_lib.lessons.large_batch.trials import Trial
from tests.trial_records import trial, trials as _trials




def _curves(reach: list[int], updates: int) -> list[Trial]:
    """Trials whose validation first reaches 0.8 after ``reach[seed]`` updates (checks every update)."""
    return [trial(seed=seed, val_curve=[(u, 0.9 if u >= r else 0.5) for u in range(1, updates + 1)])
            for seed, r in enumerate(reach)]


def _timed(seconds: list[float], seeds: list[int] | None = None) -> list[Trial]:
    """Trials of two epochs, each epoch taking ``seconds[seed]``."""
    return [trial(seed=seed, epoch_s=[s, s]) for seed, s in zip(seeds or range(len(seconds)), seconds)]


def test_updates_to_target() -> None:
    curve = [(8, 0.5), (16, 0.79), (24, 0.80)]
    assert time_to_target.updates_to_target(curve, 0.80) == 24
    assert time_to_target.updates_to_target(curve, 0.81) is None
    with pytest.raises(ValueError, match="0..1"):
        time_to_target.updates_to_target(curve, 80)


def test_target_from_baseline_reads_validation_only() -> None:
    baseline = _trials([0.10, 0.10], val=[[0.5, 0.70], [0.6, 0.80]])   # test accuracies must not matter
    assert time_to_target.target_from_baseline(baseline, 0.9) == pytest.approx(0.9 * 0.75)
    assert time_to_target.target_from_baseline(baseline, 1.0) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="fraction"):
        time_to_target.target_from_baseline(baseline, 90)
    with pytest.raises(ValueError, match="no trials"):
        time_to_target.target_from_baseline([], 0.9)


def test_images_ratio_pairs_seeds() -> None:
    small, large = _curves([96, 96, 48], 192), _curves([12, 6, 6], 24)
    mean, half = time_to_target.images_ratio(large, small, 128, 16, 0.8)
    # per seed: 12*128/(96*16) = 1.0, 6*128/(96*16) = 0.5, 6*128/(48*16) = 1.0
    assert mean == pytest.approx(2.5 / 3)
    assert half > 0
    assert time_to_target.images_ratio(_curves([12, 30], 24), small[:2], 128, 16, 0.8) is None   # never reached


def test_time_to_target_winner_can_come_out_each_way() -> None:
    assert time_to_target.time_to_target_winner((0.8, 0.1), (1.4, 0.2)) == "large batch"
    assert time_to_target.time_to_target_winner((2.0, 0.1), (1.4, 0.2)) == "small batch"
    assert time_to_target.time_to_target_winner((1.3, 0.1), (1.4, 0.2)) == "cannot tell"
    assert time_to_target.time_to_target_winner((1.3, math.nan), (1.6, 0.2)) == "large batch"   # one seed: no spread
    assert time_to_target.time_to_target_winner(None, (9.0, 0.1)) == "small batch"              # never reached


def test_paired_speed_ratio_pairs_each_round() -> None:
    # round 0: small 2 s/epoch, larges 1 s and 0.5 s -> 100 and 200 images/s against 50: mean 3.0
    # round 1: the machine slowed down 2x for every run of the round: the same ratio, 3.0
    small = _timed([2.0, 4.0])
    large = [_timed([1.0, 2.0]), _timed([0.5, 1.0])]
    assert time_to_target.paired_speed_ratio([(small, large)], 100) == (pytest.approx(3.0), pytest.approx(0.0))
    # two ladders with the same seeds are two sets of rounds, not one
    other = (_timed([1.0]), [_timed([1.0])])
    mean, half = time_to_target.paired_speed_ratio([(small, large), other], 100)
    assert mean == pytest.approx(7 / 3) and half > 0
    # a seed the large rows did not run is no round; no round at all is an error
    assert time_to_target.paired_speed_ratio([(_timed([2.0, 4.0, 9.0]), large)], 100)[0] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="no round"):
        time_to_target.paired_speed_ratio([(_timed([2.0], [7]), large)], 100)


def test_import_does_not_start_tensorflow() -> None:
    code = "import sys, course_lib.lessons.large_batch.time_to_target; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
