"""Tests of course_lib.lessons.large_batch.ladder_verdicts: paired differences over seeds and the rung verdicts
of notebook 04."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from course_lib.lessons.large_batch import ladder_verdicts
from tests.trial_records import trial, trials as _trials, TRIAL_LADDER



def test_paired_difference_and_decide() -> None:
    mean, half = ladder_verdicts.paired_difference(_trials([0.80, 0.82, 0.81]), _trials([0.70, 0.71, 0.72]))
    assert mean == pytest.approx(0.10)
    # differences 0.10, 0.11, 0.09: sd 0.01, t(2) = 4.303
    assert half == pytest.approx(4.303 * 0.01 / math.sqrt(3), rel=1e-3)
    assert ladder_verdicts.decide(mean, half, 0.0) == "above"
    assert ladder_verdicts.decide(mean, half, 0.2) == "below"
    assert ladder_verdicts.decide(mean, half, 0.1) == "cannot tell"
    with pytest.raises(ValueError, match="at least 2 seeds"):
        ladder_verdicts.paired_difference(_trials([0.8]), _trials([0.7]))


def test_explain_claims_a_mechanism_only_when_the_rung_measured_better() -> None:
    assert ladder_verdicts.explain("better", "the ramp helps") == "the ramp helps"
    assert ladder_verdicts.explain("worse", "the ramp helps") == "proposed: the ramp helps; not shown here (worse)"
    assert "not shown" in ladder_verdicts.explain("cannot tell", "the ramp helps")


def test_the_rung_verdicts_of_04_can_come_out_the_other_way() -> None:
    """Fed numbers where they must flip: the recipe beats naive, loses to it, or cannot tell."""
    close, naive = _trials([0.80, 0.805, 0.82]), _trials([0.60, 0.62, 0.61])
    assert ladder_verdicts.decide(*ladder_verdicts.paired_difference(close, naive)) == "above"
    assert ladder_verdicts.decide(*ladder_verdicts.paired_difference(naive, close)) == "below"
    assert ladder_verdicts.decide(*ladder_verdicts.paired_difference(_trials([0.61, 0.60, 0.62]), naive)) == "cannot tell"


def test_ladder_table_verdicts() -> None:
    runs = {"baseline": _trials([0.85, 0.86, 0.84], updates=192),
            "naive": _trials([0.70, 0.72, 0.71], val=[[0.5, 0.6]] * 3),
            "+ linear": _trials([0.70, 0.73, 0.71])}
    steps = ladder_verdicts.ladder_table(TRIAL_LADDER, runs)
    assert list(steps.index) == ["naive", "+ linear"] and steps.loc["naive", "parent"] == "baseline"
    assert steps.loc["naive", "verdict"] == "worse"
    assert steps.loc["+ linear", "verdict"] == "cannot tell"


def test_a_run_without_the_test_set_is_compared_on_validation_only() -> None:
    tuned = [trial(seed=s, test_accuracy=None, test_loss=None, val_accuracy=v) for s, v in enumerate([0.8, 0.82])]
    other = [trial(seed=s, test_accuracy=None, test_loss=None, val_accuracy=v) for s, v in enumerate([0.7, 0.71])]
    assert ladder_verdicts.paired_difference(tuned, other, "val_accuracy")[0] == pytest.approx(0.105)
    with pytest.raises(ValueError, match="did not read the test set"):
        ladder_verdicts.paired_difference(tuned, other)


def test_import_does_not_start_tensorflow() -> None:
    code = "import sys, course_lib.lessons.large_batch.ladder_verdicts; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
