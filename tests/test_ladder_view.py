"""Tests of course_lib.lessons.large_batch.ladder_view: notebook 04's seed table and curves from synthetic trials."""

from __future__ import annotations

import subprocess
import sys

import pytest

from course_lib.lessons.large_batch import ladder_view
from tests.trial_records import trials as _trials, TRIAL_LADDER



def test_seed_table_takes_a_target_per_row() -> None:
    runs = {"baseline": _trials([0.85, 0.86, 0.84], updates=192),
            "naive": _trials([0.70, 0.72, 0.71], val=[[0.5, 0.6]] * 3),
            "+ linear": _trials([0.70, 0.73, 0.71], val=[[0.5, 0.6]] * 3)}
    targets = {"baseline": 0.8, "naive": 0.8, "+ linear": 0.55}
    table = ladder_view.seed_table(TRIAL_LADDER, runs, target=targets)
    assert table.loc["naive", "updates_to_target"] == "not reached"
    assert table.loc["+ linear", "updates_to_target"] == 24   # second of two points, 12 updates apart


def test_seed_table() -> None:
    runs = {"baseline": _trials([0.85, 0.86, 0.84], updates=192),
            "naive": _trials([0.70, 0.72, 0.71], val=[[0.5, 0.6]] * 3),
            "+ linear": _trials([0.70, 0.73, 0.71])}
    table = ladder_view.seed_table(TRIAL_LADDER, runs, target=0.80)
    assert list(table.index) == ["baseline", "naive", "+ linear"]
    assert table.loc["naive", "changes"] == "batch 32 -> 256"
    assert table.loc["+ linear", "changes"] == "+lr_scaling linear"
    assert table.loc["baseline", "test_accuracy"] == pytest.approx(0.85)
    assert table.loc["baseline", "seeds"] == 3 and table.loc["baseline", "updates"] == 192
    assert table.loc["baseline", "updates_to_target"] == 192
    assert table.loc["naive", "updates_to_target"] == "not reached"
    with pytest.raises(ValueError, match="no trials"):
        ladder_view.seed_table(TRIAL_LADDER, {"baseline": runs["baseline"]}, 0.8)


def test_plot_curves_has_two_panels() -> None:
    import matplotlib

    matplotlib.use("Agg")
    runs = {"baseline": _trials([0.85, 0.86]), "naive": _trials([0.7, 0.72]),
            "+ linear": _trials([0.75, 0.74])}
    fig = ladder_view.plot_curves(TRIAL_LADDER, runs, images_per_epoch=2048, target=0.8, title="t")
    assert len(fig.axes) == 2
    assert len(fig.axes[0].lines) == 4  # three configurations + target line


def test_import_does_not_start_tensorflow() -> None:
    code = "import sys, course_lib.lessons.large_batch.ladder_view; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
