"""course_lib.lessons.large_batch.recovery: notebook 04's question (the fraction of the naive loss the recipe
recovers), its verdict words and summary sentence (which a test here flips), and the seeds its design asks for."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from course_lib.lessons.large_batch import recovery
from course_lib.lessons.large_batch.trials import Trial
from course_lib.training.stats import mean_ci95
from tests.trial_records import trial

BASELINE = [0.80, 0.82, 0.79, 0.81, 0.83, 0.80]
NAIVE = [0.60, 0.65, 0.58, 0.62, 0.66, 0.61]


def _trials(accuracies: list[float], seeds: list[int] | None = None) -> list[Trial]:
    return [trial(seed=seed, test_accuracy=a) for seed, a in zip(seeds or range(len(accuracies)), accuracies)]


def _recipe(fraction: float, noise: float = 0.004) -> list[Trial]:
    """A recipe row that wins back ``fraction`` of each seed's loss, give or take ``noise``."""
    wobble = [1, -1, 0.5, -0.5, 0, 1]
    return _trials([n + fraction * (b - n) + noise * w for b, n, w in zip(BASELINE, NAIVE, wobble)])


def _fraction(recipe: list[Trial]) -> recovery.Recovery:
    return recovery.recovered_fraction(_trials(BASELINE), _trials(NAIVE), recipe)


def test_the_fraction_is_gain_over_loss_of_the_paired_means() -> None:
    found = _fraction(_recipe(0.6))
    gain = [r.test_accuracy - n for r, n in zip(_recipe(0.6), NAIVE)]
    loss = [b - n for b, n in zip(BASELINE, NAIVE)]
    assert found.fraction == pytest.approx(sum(gain) / sum(loss))
    assert found.seeds == 6 and found.loss == pytest.approx(mean_ci95(loss))
    assert found.gain == pytest.approx(mean_ci95(gain))
    assert found.low < found.fraction < found.high


@pytest.mark.parametrize("fraction", [0.1, 0.6, 1.0])
def test_the_interval_ends_are_where_the_t_interval_of_gain_minus_f_loss_touches_0(fraction: float) -> None:
    """Fieller's interval, from its definition: at each end, mean(gain - f loss) is exactly one half-width from 0."""
    recipe = _recipe(fraction, noise=0.01)
    found = _fraction(recipe)
    gain = [r.test_accuracy - n for r, n in zip(recipe, NAIVE)]
    loss = [b - n for b, n in zip(BASELINE, NAIVE)]
    for end in (found.low, found.high):
        mean, half = mean_ci95([g - end * v for g, v in zip(gain, loss)])
        assert abs(mean) == pytest.approx(half, rel=1e-9)
    inside = (found.low + found.high) / 2
    mean, half = mean_ci95([g - inside * v for g, v in zip(gain, loss)])
    assert abs(mean) < half


def test_below_1_exactly_when_the_gap_to_the_baseline_is_above_0() -> None:
    for fraction in (0.5, 0.9, 0.97, 1.0, 1.05):
        found = _fraction(_recipe(fraction, noise=0.01))
        gap, half = found.gap
        assert (found.high < 1) == (gap - half > 0), fraction


def test_seeds_pair_by_seed_and_need_two() -> None:
    extra = _trials(BASELINE + [0.5], seeds=[0, 1, 2, 3, 4, 5, 9])   # seed 9 ran in one row only
    assert recovery.recovered_fraction(extra, _trials(NAIVE), _recipe(0.6)).seeds == 6
    with pytest.raises(ValueError, match="at least 2 seeds"):
        recovery.recovered_fraction(_trials([0.8]), _trials([0.6]), _trials([0.7]))


@pytest.mark.parametrize("fraction, word", [
    (0.6, "part of it, not all"),
    (1.0, "cannot tell whether all"),             # the recipe recovers everything
    (0.0, "cannot tell whether any"),             # the recipe recovers nothing
    (1.5, "more than all of it"),
    (-0.5, "none: the recipe is worse than naive"),
])
def test_the_verdict_and_the_sentence_flip_with_what_the_runs_show(fraction: float, word: str) -> None:
    found = _fraction(_recipe(fraction))
    assert recovery.recovery_word(found) == word
    line, sentence = recovery.recovery_line("SGD", found), recovery.recovery_sentence("SGD", found)
    assert line.endswith(f"-> how much of the loss: {word}") and f": {word}, so " in sentence


def test_every_answer_has_its_own_sentence() -> None:
    sentences = {recovery.recovery_sentence("Adam", _fraction(_recipe(f))).split(": ", 1)[1].split("(", 1)[0]
                 for f in (0.6, 1.0, 0.0, 1.5, -0.5)}
    assert len(sentences) == 5


def test_an_unresolved_loss_gives_an_unbounded_interval_and_cannot_tell() -> None:
    naive = [0.80, 0.70, 0.83, 0.74, 0.85, 0.78]   # loses about 2 points on average, +-5: not told from 0
    found = recovery.recovered_fraction(_trials(BASELINE), _trials(naive), _trials([0.81] * 6))
    assert math.isinf(found.low) and math.isinf(found.high)
    assert recovery.recovery_word(found) == "cannot tell"
    assert "unbounded" in recovery.recovery_line("SGD", found)
    assert "cannot tell, so these seeds cannot tell how much" in recovery.recovery_sentence("SGD", found)


def test_seeds_needed_follows_the_t_interval() -> None:
    # spread 3.4 points: t(6) * 3.4 / sqrt(7) = 3.30 > 3, t(7) * 3.4 / sqrt(8) = 2.84 <= 3
    assert recovery.seeds_needed(0.034, 0.03) == 8
    assert recovery.seeds_needed(0.0124, 0.03) == 4   # t(2) * 1.24 / sqrt(3) = 3.08 > 3
    assert recovery.seeds_needed(0.0, 0.03) == 2
    assert recovery.seeds_needed(1.0, 0.01, most=10) is None
    with pytest.raises(ValueError, match="spread"):
        recovery.seeds_needed(0.01, 0.0)


def test_the_plan_sizes_each_ladder_for_its_aim_at_the_spread_bound() -> None:
    for ladder, pilot in recovery.PILOT.items():
        assert all(len(values) == len(recovery.PILOT_SEEDS) for values in pilot.values()), ladder
        plan = recovery.plan_seeds(pilot)
        assert plan.aim == pytest.approx(min(plan.fraction, 1 - plan.fraction) / 2)
        assert plan.bound > plan.spread and plan.predicted <= plan.aim
        fewer = recovery.plan_seeds(pilot, aim=plan.aim * 2)
        assert fewer.seeds < plan.seeds                       # a looser aim needs fewer seeds
    assert recovery.plan_seeds(recovery.PILOT["SGD"], aim=0.01, most=60).seeds is None   # beyond the budget


def test_the_plan_refuses_a_pilot_that_cannot_size_it() -> None:
    with pytest.raises(ValueError, match="same seeds"):
        recovery.plan_seeds({"baseline": [0.8, 0.8, 0.8], "naive": [0.6, 0.6], "recipe": [0.7, 0.7, 0.7]})
    with pytest.raises(ValueError, match="does not lose"):
        recovery.plan_seeds({"baseline": [0.6, 0.6, 0.6], "naive": [0.7, 0.7, 0.7], "recipe": [0.7, 0.7, 0.7]})
    with pytest.raises(ValueError, match="give the aim"):
        recovery.plan_seeds({"baseline": [0.8, 0.8, 0.81], "naive": [0.6, 0.6, 0.6], "recipe": [0.9, 0.9, 0.9]})


def test_import_does_not_start_tensorflow() -> None:
    code = "import sys, course_lib.lessons.large_batch.recovery; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
