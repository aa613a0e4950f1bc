"""Tests of course_lib.training.schedules' warm-up multiplier: where the ramp starts and ends (issue 44)."""

from __future__ import annotations

import math

import pytest

from course_lib.training import schedules


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
