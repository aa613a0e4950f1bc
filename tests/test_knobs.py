"""Tests of course_lib.lessons.knobs: per-epoch step samples, medians, and the "cannot tell" rule."""

from __future__ import annotations

import pytest

from course_lib.lessons import knobs


def test_step_samples_leave_the_warmup_epoch_out():
    epochs = [{"epoch": 1, "step_time_ms": 900.0, "warmup": True},
              {"epoch": 2, "step_time_ms": 100.0, "warmup": False},
              {"epoch": 3, "step_time_ms": 110.0}]
    assert knobs.step_samples(epochs).tolist() == [100.0, 110.0]
    with pytest.raises(ValueError, match="--epochs >= 2"):
        knobs.step_samples(epochs[:1])


def test_summarise_exact():
    assert knobs.summarise([1, 2, 3, 4, 5]) == {"median": 3.0, "q1": 2.0, "q3": 4.0, "n": 5}
    with pytest.raises(ValueError):
        knobs.summarise([])


@pytest.mark.parametrize("variant, verdict", [
    ([105, 106, 107, 108, 109], "slower"),   # every sample above the baseline's 100-104
    ([95, 96, 97, 98, 99], "faster"),
    ([104, 105, 106, 107, 108], "cannot tell"),  # 104 ties the baseline's largest sample
    ([90, 101, 102, 103, 130], "cannot tell"),
])
def test_compare_tells_apart_only_outside_the_noise(variant, verdict):
    result = knobs.compare([100, 101, 102, 103, 104], variant)
    assert result["verdict"] == verdict
    assert result["inside_noise"] is (verdict == "cannot tell")
    assert result["ratio"] == pytest.approx(variant[2] / 102)


def test_plot_knobs_draws_every_sample():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = knobs.plot_knobs({"base": [100, 101, 102], "x": [200, 201]}, "base")
    dots = [line for line in ax.get_lines() if line.get_linestyle() == "None"
            and line.get_marker() == "o"]
    assert sorted(len(d.get_xdata()) for d in dots) == [2, 3]
    assert [t.get_text() for t in ax.texts] == [" baseline (1.00x)", " slower (1.99x)"]
    plt.close(ax.figure)


def test_knob_table():
    table = knobs.knob_table({"base": [100, 101, 102], "x": [200, 201, 202]}, "base")
    assert table["verdict"].tolist() == ["baseline", "slower"]
    assert table["vs_baseline"].tolist() == pytest.approx([1.0, 201 / 101])
    with pytest.raises(KeyError, match="baseline 'nope'"):
        knobs.knob_table({"base": [1.0]}, "nope")
