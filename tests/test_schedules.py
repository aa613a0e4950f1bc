"""Tests of course_lib.training.schedules: the learning-rate rule every ``--scale-lr`` calls (issue 52), and the
warm-up multiplier: where the ramp starts and ends (issue 44)."""

from __future__ import annotations

import math

import pytest

from course_lib.training import schedules
from script_lr import RULE_CASES  # (optimizer, N, rate from --lr 0.001): linear for SGD, sqrt for Adam


@pytest.mark.parametrize("growth", [2, math.sqrt(2), 8.0])
def test_the_ramp_starts_one_step_above_one_workers_rate_and_ends_at_the_scaled_rate(growth: float) -> None:
    """Horovod's fractional epoch (epoch + batch / steps) fed to the multiplier: step 1 trains one ramp increment
    above base_lr = scaled / growth, the last step of the ramp at the scaled rate (√size for Adam: notebook 03)."""
    base, steps, warmup = 0.001, 12, 2
    scaled = base * growth
    ramp = schedules.warmup_multiplier(growth, warmup, steps)
    assert scaled * ramp(0.0) == pytest.approx(base * (1 + (growth - 1) / (warmup * steps)))
    assert scaled * ramp(warmup - 1 / steps) == pytest.approx(scaled)
    assert base <= scaled * ramp(0.0) < scaled


def test_no_growth_no_ramp_and_bad_input() -> None:
    assert schedules.warmup_multiplier(1, 3, 10)(0.5) == 1.0
    with pytest.raises(ValueError, match="growth must be >= 1"):
        schedules.warmup_multiplier(0.5, 1, 1)


def test_warmup_multiplier_matches_horovods_ramp() -> None:
    growth, warmup, spe = 8, 2, 4
    mult = schedules.warmup_multiplier(growth, warmup, spe)
    # First step: (1/4 * 7/2 + 1) / 8, exactly as hvd.LearningRateWarmupCallback with size 8.
    assert mult(0.0) == pytest.approx((0.25 * 7 / 2 + 1) / 8)
    # Last step of the ramp (epoch 1, batch 3 -> 1.75) reaches exactly 1.
    assert mult(1.75) == pytest.approx(1.0)
    values = [mult(e + b / spe) for e in range(warmup) for b in range(spe)]
    assert values == sorted(values) and values[0] > 1 / growth
    assert schedules.warmup_multiplier(1, 3, 10)(0.5) == 1.0  # no growth: no ramp
    with pytest.raises(ValueError, match="growth must be >= 1"):
        schedules.warmup_multiplier(0, 1, 1)



@pytest.mark.parametrize(("optimizer", "workers", "expected"), RULE_CASES)
def test_scaled_lr_is_linear_for_sgd_and_square_root_for_adam(optimizer: str, workers: int, expected: float) -> None:
    """The four cases of issue 52, exactly: Adam at 2 workers is 0.00141421, not 0.002."""
    assert schedules.scaled_lr(optimizer, 0.001, workers) == pytest.approx(expected, rel=1e-12)
    assert f"{schedules.scaled_lr(optimizer, 0.001, workers):g}" == f"{expected:g}"  # as the scripts print it


def test_every_course_optimizer_has_a_rule_sgd_family_linear_adam_family_square_root() -> None:
    """LARS is momentum SGD with a trust ratio: linear; LAMB is Adam with one: square root. Any case is accepted,
    and an optimizer without a rule is refused with the names that have one."""
    from course_lib.training.flags import OPTIMIZERS

    assert {name: schedules.lr_scaling_rule(name) for name in OPTIMIZERS} == {
        "sgd": "linear", "lars": "linear", "adam": "sqrt", "lamb": "sqrt"}
    assert schedules.scaled_lr("LAMB", 0.01, 16) == pytest.approx(0.04)
    assert schedules.scaled_lr("lars", 0.01, 16) == pytest.approx(0.16)
    with pytest.raises(ValueError, match="adam, lamb, lars, sgd"):
        schedules.scaled_lr("rmsprop", 0.001, 2)
    with pytest.raises(ValueError, match="growth >= 1"):
        schedules.scaled_lr("adam", 0.001, 0.5)
    with pytest.raises(ValueError, match="base_lr > 0"):
        schedules.scaled_lr("sgd", 0.0, 2)
