"""Tests of course_lib.lessons.large_batch.adam_rule: notebook 04's Adam √N-against-linear rung (issue 52, item 6),
decided on the validation split, with a verdict that can come out True, False or cannot tell."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from course_lib.lessons.large_batch import adam_rule
from course_lib.training.stats import spread_upper_bound, t_critical_95
from tests.trial_records import trial

ROOT = Path(__file__).resolve().parents[1]
SQRT_LR, LINEAR_LR = 0.001 * math.sqrt(8), 0.008


def rung(val: list[float], lr: float, test: list[float] | None = None) -> list:
    """One trial per seed with these final validation accuracies (and test accuracies, or none read)."""
    return [trial(seed=seed, val_accuracy=v, val_curve=[(24, v)], lr=lr,
                  test_accuracy=None if test is None else test[seed], test_loss=None if test is None else 0.5)
            for seed, v in enumerate(val)]


@pytest.mark.parametrize(("linear", "expected"), [
    ([0.70, 0.71, 0.69, 0.70], "True"),          # √8 about 5 points above linear, seed after seed
    ([0.80, 0.80, 0.79, 0.81], "False"),         # linear about 5 points above: the course's rule loses
    ([0.77, 0.73, 0.76, 0.74], "cannot tell"),   # differences of both signs: the interval holds 0
])
def test_the_verdict_can_come_out_each_way(linear: list[float], expected: str) -> None:
    found = adam_rule.compare_rules(rung([0.75, 0.76, 0.74, 0.75], SQRT_LR), rung(linear, LINEAR_LR))
    assert found.seeds == 4 and found.growth == 8
    assert adam_rule.rule_verdict(found) == expected
    assert adam_rule.rule_line(found).endswith(f"the square-root rule beats linear scaling here: {expected}")
    assert f"the square-root rule beats linear scaling here: {expected}. " in adam_rule.rule_sentence(found)


def test_the_sentence_follows_the_verdict() -> None:
    sentences = {adam_rule.rule_sentence(adam_rule.compare_rules(rung([0.75, 0.76, 0.74], SQRT_LR),
                                                                 rung(linear, LINEAR_LR)))
                 for linear in ([0.70, 0.71, 0.69], [0.80, 0.81, 0.79], [0.77, 0.73, 0.75])}
    assert len(sentences) == 3
    said = " ".join(sentences)
    assert "Linear scaling is better for Adam" in said and "The square-root rule is better for Adam" in said
    assert "cannot tell the two rules apart" in said


def test_the_rule_is_decided_on_validation_never_on_the_test_set() -> None:
    """The test accuracies say the opposite of the validation ones: the verdict follows validation; a rung that did
    not read the test set (notebook 04's linear rung) compares all the same."""
    sqrt_runs = rung([0.75, 0.76, 0.74], SQRT_LR, test=[0.60, 0.61, 0.59])
    linear_read = rung([0.70, 0.71, 0.69], LINEAR_LR, test=[0.80, 0.81, 0.79])
    assert adam_rule.rule_verdict(adam_rule.compare_rules(sqrt_runs, linear_read)) == "True"
    found = adam_rule.compare_rules(sqrt_runs, rung([0.70, 0.71, 0.69], LINEAR_LR))   # test set never read
    assert found.difference == pytest.approx(0.05) and adam_rule.rule_verdict(found) == "True"


def test_the_paired_difference_and_its_interval() -> None:
    found = adam_rule.compare_rules(rung([0.75, 0.76, 0.74], SQRT_LR), rung([0.70, 0.70, 0.70], LINEAR_LR))
    # differences 0.05, 0.06, 0.04: sd 0.01, t(2) = 4.303
    assert found.difference == pytest.approx(0.05)
    assert found.half_width == pytest.approx(4.303 * 0.01 / math.sqrt(3), rel=1e-3)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        adam_rule.compare_rules(rung([0.75], SQRT_LR), rung([0.70], LINEAR_LR))


def test_the_plan_predicts_the_half_width_at_the_pilots_spread_bound() -> None:
    pilot = {"sqrt": [0.75, 0.76, 0.74, 0.77], "linear": [0.70, 0.73, 0.70, 0.71]}
    found = adam_rule.plan(pilot, seeds=10)
    differences = [0.05, 0.03, 0.04, 0.06]
    assert found.difference == pytest.approx(0.045)
    bound = spread_upper_bound(found.spread, 4)
    assert found.bound == pytest.approx(bound) and found.bound > found.spread
    assert found.predicted == pytest.approx(t_critical_95(9) * bound / math.sqrt(10))
    assert found.spread == pytest.approx(math.sqrt(sum((d - 0.045) ** 2 for d in differences) / 3))
    for bad in ({"sqrt": [0.7, 0.7], "linear": [0.7, 0.7]}, {"sqrt": [0.7] * 3, "linear": [0.7] * 4}):
        with pytest.raises(ValueError, match="same length >= 3"):
            adam_rule.plan(bad, seeds=10)
    with pytest.raises(ValueError, match="seeds >= 2"):
        adam_rule.plan(pilot, seeds=1)


def test_the_pilot_is_the_two_rungs_on_the_same_seeds() -> None:
    assert len(adam_rule.PILOT["sqrt"]) == len(adam_rule.PILOT["linear"]) == 24
    assert all(0 < v < 1 for row in adam_rule.PILOT.values() for v in row)


def test_notebook_04_runs_the_linear_rung_on_validation_and_prints_its_verdict() -> None:
    """The rung runs with the Adam ladder's seeds in the same rounds, never reads the test set, and the summary says
    what its verdict decided."""
    nb = json.loads((ROOT / "notebooks" / "04_large_batch.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert 'RUNGS = {"SGD": LADDERS["SGD"], "Adam": [*LADDERS["Adam"], LINEAR]}' in code
    assert "test=config is not LINEAR" in code
    assert 'adam_rule.compare_rules(runs["Adam recipe"], runs[LINEAR.name])' in code
    assert "adam_rule.rule_sentence(RULE)" in code
    printed = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                      for o in c.get("outputs", []))
    assert "the square-root rule beats linear scaling here: " in printed
