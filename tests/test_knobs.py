"""Tests of course_lib.lessons.communication.knobs: per-epoch step samples, medians, and the "cannot tell" rule."""

from __future__ import annotations

import pytest

from course_lib.lessons.communication import knobs


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


def test_abba_order_reverses_every_other_round():
    assert knobs.abba_order(["A", "B"], 3) == [(0, "A"), (0, "B"), (1, "B"), (1, "A"), (2, "A"), (2, "B")]
    for bad in ((["A", "A"], 2), (["A"], 0), ([], 1)):
        with pytest.raises(ValueError):
            knobs.abba_order(*bad)


def test_paired_compare_cancels_a_drift_that_moves_both_sides():
    # the machine slows by 50 ms between the rounds; the variant costs 10 +- 1 ms in every pair
    rounds = [([100, 101, 102], [111, 110, 113]), ([150, 151, 152], [161, 160, 162])]
    effect = knobs.paired_compare(rounds)
    assert effect.pairs == 6 and effect.verdict == "slower"
    assert effect.difference_ms == pytest.approx(61 / 6)          # (11 + 9 + 11 + 11 + 9 + 10) / 6
    # unpaired, the same samples overlap (100..152 vs 110..162): the old rule cannot tell
    flat = [x for a, _ in rounds for x in a], [x for _, b in rounds for x in b]
    assert knobs.compare(*flat)["verdict"] == "cannot tell"


@pytest.mark.parametrize("shift, verdict", [(-10, "faster"), (0.0, "cannot tell"), (10, "slower")])
def test_paired_compare_verdict_follows_the_interval(shift, verdict):
    noise = [0.5, -0.5, 0.3, -0.3]
    rounds = [([100.0] * 4, [100.0 + shift + n for n in noise])]
    assert knobs.paired_compare(rounds).verdict == verdict
    with pytest.raises(ValueError, match="two paired epochs"):
        knobs.paired_compare([([1.0], [2.0])])


def test_plot_paired_titles_the_verdict_it_plots():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = {"base": [[100, 101], [150, 151]], "x": [[111, 110], [161, 160]]}
    effect = knobs.paired_compare(list(zip(rounds["base"], rounds["x"])))
    ax = knobs.plot_paired(rounds, "base", effect)
    assert "(slower)" in ax.get_title() and "+10.0" in ax.get_title()
    assert sum(len(line.get_xdata()) for line in ax.get_lines()) == 8
    plt.close(ax.figure)
