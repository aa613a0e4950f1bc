"""Tests of course_lib.lessons.data_parallelism.experiments: notebook 01's batch-size sweep, its interleaved rounds,
and the sentences written from its verdict (issue 44: a sentence that states a measured effect follows from the verdict)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest

from course_lib.lessons.common.paired_runs import round_order
from course_lib.lessons.data_parallelism import experiments
from course_lib.lessons.data_parallelism.experiments import PairedRatio

NOTEBOOK_01 = Path(__file__).resolve().parents[1] / "notebooks" / "01_data_parallelism.ipynb"


# --- the order of the rounds -----------------------------------------------------------------------
def test_round_order_is_abba_for_any_number_of_variants() -> None:
    assert [round_order("AB", i) for i in range(4)] == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]
    assert [round_order("ABC", i) for i in range(2)] == [["A", "B", "C"], ["C", "B", "A"]]
    variants = ["A", "B", "C"]
    round_order(variants, 1)
    assert variants == ["A", "B", "C"]          # the caller's list is not reversed in place


def test_round_order_cancels_a_steady_drift_over_each_pair_of_rounds() -> None:
    """A drift that adds d per epoch run: over rounds 0 and 1 every variant gets the same mean position."""
    positions: dict[str, list[int]] = {v: [] for v in "ABC"}
    clock = 0
    for index in range(2):
        for variant in round_order("ABC", index):
            positions[variant].append(clock)
            clock += 1
    means = {v: sum(p) / len(p) for v, p in positions.items()}
    assert len(set(means.values())) == 1, means
    rotated = {v: [] for v in "ABC"}              # the former design (rotate by one each round) does not
    clock = 0
    for index in range(2):
        turn = index % 3
        for variant in ("ABC"[turn:] + "ABC"[:turn]):
            rotated[variant].append(clock)
            clock += 1
    assert len({sum(p) / len(p) for p in rotated.values()}) > 1


# --- the verdict and the words written from it -----------------------------------------------------
CASES = {
    "True": PairedRatio(256, 16, 1.88, 0.35, 6),
    "False": PairedRatio(256, 16, 0.70, 0.10, 6),
    "cannot tell": PairedRatio(256, 16, 1.01, 0.53, 6),
}


@pytest.mark.parametrize("verdict", sorted(CASES))
def test_paired_ratio_verdict(verdict: str) -> None:
    assert CASES[verdict].verdict == verdict
    assert CASES[verdict].result_line().startswith("measured: batch 256 processes more images/s than batch 16")
    assert f": {verdict} (≈" in CASES[verdict].result_line()


def test_the_reading_and_the_summary_change_with_the_verdict() -> None:
    """Flip the verdict: the sentence after the result and the summary's bullet change with it."""
    readings = {v: c.reading() for v, c in CASES.items()}
    summaries = {v: c.summary() for v, c in CASES.items()}
    assert len(set(readings.values())) == 3 and len(set(summaries.values())) == 3
    assert "processed more images per second at batch 256" in readings["True"]
    assert "processed fewer images per second at batch 256" in readings["False"]
    assert "cannot tell batch 256 from batch 16" in readings["cannot tell"]
    assert "nothing about the batch size follows" in readings["cannot tell"]
    # only a True verdict lets the text say that throughput grows with the batch (the claim of review E-4)
    for verdict, text in [*readings.items(), *summaries.items()]:
        claims = "more images per second at batch 256" in text or "large enough to fill" in text
        assert claims == (verdict == "True"), (verdict, text)
    assert all(s.startswith("- *Measured here:* ") for s in summaries.values())
    assert all(r.startswith("*Measured here:* ") for r in readings.values())   # masked whole by nbval: it varies
    assert "≈1.88 ± 0.35" in summaries["True"] and "6 paired rounds" in summaries["True"]


def test_one_round_cannot_decide() -> None:
    single = PairedRatio(256, 16, 2.0, math.nan, 1)
    assert single.verdict == "cannot tell" and "cannot tell" in single.reading()


def test_notebook_01_shows_the_words_of_its_verdict() -> None:
    """01 prints the result line, the reading and the summary bullet from one PairedRatio, and its markdown
    states no measured effect of the batch size itself (review E-4)."""
    cells = nbformat.read(NOTEBOOK_01, as_version=4).cells
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    assert ".compare(256, 16)" in code
    for call in (".result_line()", ".reading()", ".summary()"):
        assert call in code, f"01 no longer shows {call}"
    summary_at = next(i for i, c in enumerate(cells) if c.source.startswith("## Summary"))
    assert ".summary()" in cells[summary_at + 1].source, "the summary's measured bullet must follow the summary"
    markdown = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert "throughput grows with the batch" not in markdown
    assert "This is why data-parallel training keeps the per-device batch" not in markdown


# --- the sweep itself --------------------------------------------------------------------------------
@pytest.mark.slow  # > 2 s: left out of `make check`
def test_batch_size_sweep_trains_the_batch_sizes_in_turn_and_reports_the_machine(small_fmnist, capsys):
    sweep = experiments.batch_size_sweep(small_fmnist.x_train[:256], small_fmnist.y_train[:256],
                                         [32, 128], rounds=2, warmup_epochs=1)
    table = sweep.table
    assert list(table["batch_size"]) == [32, 128] and list(table["steps_per_epoch"]) == [8, 2]
    assert list(table["epochs_timed"]) == [2, 2]
    assert (table["images_per_sec"] > 0).all() and (table["ci95"] >= 0).all()
    assert (table["cpu_per_wall"] > 0).all()
    assert ((table["disturbed"] >= 0) & (table["disturbed"] <= 2)).all()
    assert sorted(sweep.rates) == [32, 128] and [len(r) for r in sweep.rates.values()] == [2, 2]
    assert 0 <= sweep.rerun_rounds <= 1
    ratio, _, rounds = sweep.ratio(128, 32)
    assert rounds == 2 and ratio == pytest.approx(sum(a / b for a, b in zip(sweep.rates[128], sweep.rates[32])) / 2)
    assert sweep.compare(128, 32).ratio == ratio
    out = capsys.readouterr().out
    assert "batch sizes 32, 128: 1 warm-up epoch(s) each, then 2 rounds of one epoch each, in turn" in out
    assert "[2/2] round 2" in out


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"batch_sizes": [8], "rounds": 0}, "rounds must be >= 1, got 0"),
    ({"batch_sizes": [8], "warmup_epochs": -1}, "warmup_epochs must be >= 0, got -1"),
    ({"batch_sizes": [8], "max_rerun_rounds": -1}, "max_rerun_rounds must be >= 0, got -1"),
    ({"batch_sizes": [8, 8]}, "batch sizes must be distinct"),
    ({"batch_sizes": [8, 65]}, r"batch sizes must be in 1..64 \(the number of images\), got \[65\]"),
])
def test_batch_size_sweep_refuses_a_design_it_cannot_run(kwargs, message):
    import numpy as np

    with pytest.raises(ValueError, match=message):
        experiments.batch_size_sweep(np.zeros((64, 28, 28), np.uint8), np.zeros(64, np.int64), **kwargs)


class ScriptedTrainer:
    """Stands in for the sweep's trainer: each epoch returns the next scripted (images/s, CPU/wall)."""

    order: list[int] = []
    script: dict[int, list[tuple[float, float]]] = {}

    def __init__(self, images, labels, batch, seed):
        self.batch = batch

    @staticmethod
    def fresh_session():
        pass

    def epoch(self):
        from course_lib.training.epoch_rates import EpochRate

        ScriptedTrainer.order.append(self.batch)
        rate, cpu_per_wall = ScriptedTrainer.script[self.batch].pop(0)
        return EpochRate(rate, 1000.0 * self.batch / rate, cpu_per_wall)


def scripted_sweep(monkeypatch, script, **kwargs):
    import numpy as np

    monkeypatch.setattr(experiments, "_Trainer", ScriptedTrainer)
    ScriptedTrainer.order, ScriptedTrainer.script = [], {b: list(v) for b, v in script.items()}
    return experiments.batch_size_sweep(np.zeros((512, 28, 28), np.uint8), np.zeros(512, np.int64),
                                        sorted(script), progress=False, **kwargs)


def test_batch_size_sweep_alternates_the_order_and_reruns_a_disturbed_round(monkeypatch):
    # warm-up, rounds 1-3, one re-run; round 2's batch-256 epoch lost a core (CPU/wall 0.9 of a best 1.8)
    script = {16: [(300, 1.1), (300, 1.1), (310, 1.1), (290, 1.1), (300, 1.1)],
              256: [(500, 1.8), (600, 1.8), (330, 0.9), (570, 1.8), (630, 1.8)]}
    sweep = scripted_sweep(monkeypatch, script, rounds=3, warmup_epochs=1)
    # warm-up; rounds A B, B A, A B; the re-run of round 2 keeps its order (B A)
    assert ScriptedTrainer.order == [16, 256, 16, 256, 256, 16, 16, 256, 256, 16]
    assert sweep.rerun_rounds == 1
    assert sweep.rates == {16: [300, 300, 290], 256: [600, 630, 570]}            # round 2 replaced
    assert list(sweep.table["disturbed"]) == [0, 0] and list(sweep.table["epochs_timed"]) == [3, 3]
    ratio, ci, rounds = sweep.ratio(256, 16)
    assert rounds == 3 and ratio == pytest.approx((2.0 + 2.1 + 570 / 290) / 3) and ci > 0
    with pytest.raises(KeyError, match="batch size 64 was not in the sweep"):
        sweep.ratio(64, 16)


def test_batch_size_sweep_keeps_a_disturbed_round_when_the_budget_is_spent(monkeypatch):
    script = {16: [(300, 1.1)] * 3, 256: [(600, 1.8), (330, 0.9), (320, 0.9)]}
    sweep = scripted_sweep(monkeypatch, script, rounds=2, warmup_epochs=0, max_rerun_rounds=1)
    assert sweep.rerun_rounds == 1 and sweep.rates[256] == [600, 330]
    assert list(sweep.table["disturbed"]) == [0, 1]


def test_the_step_time_is_the_batch_over_the_images_per_second_shown(monkeypatch):
    """issue 52: 01's table printed 18.9 ms beside 909.0 images/s at batch 16 (16 / 909.0 = 17.6 ms): the step time
    was a mean of the epochs' own step times. The rates here differ epoch to epoch, so that mean is longer."""
    script = {16: [(300, 1.0), (200, 1.0), (400, 1.0)], 256: [(600, 1.0), (300, 1.0), (900, 1.0)]}
    sweep = scripted_sweep(monkeypatch, script, rounds=2, warmup_epochs=1)
    table = sweep.table.set_index("batch_size")
    for batch in (16, 256):
        assert table.loc[batch, "step_time_ms"] == pytest.approx(1000.0 * batch / table.loc[batch, "images_per_sec"],
                                                                 rel=1e-12)
    assert table.loc[16, "images_per_sec"] == pytest.approx(300.0)       # the mean of 200 and 400
    assert table.loc[16, "step_time_ms"] == pytest.approx(1000.0 * 16 / 300)   # not (80 + 40) / 2 = 60 ms


@pytest.mark.parametrize(("large", "expected"), [
    ([600, 640, 580, 620, 610, 600], "True"),        # batch 256 twice as fast, round after round
    ([150, 160, 140, 155, 150, 150], "False"),       # batch 256 half as fast: the verdict can fail
    ([200, 420, 290, 350, 260, 330], "cannot tell"),  # a noisy machine: the ratios straddle 1
])
def test_notebook_01_batch_verdict_can_go_each_way(monkeypatch, large, expected):
    script = {16: [(300, 1.0)] * 7, 256: [(600, 1.0)] + [(r, 1.0) for r in large]}
    sweep = scripted_sweep(monkeypatch, script, rounds=6, warmup_epochs=1)
    compared = sweep.compare(256, 16)
    assert compared.verdict == expected and compared.rounds == 6
    words = {"True": "processed more images", "False": "processed fewer images", "cannot tell": "could not tell"}
    assert [w in compared.summary() for w in words.values()] == [v == expected for v in words]


def test_the_sweep_figure_draws_the_paired_interval_the_verdict_uses(monkeypatch):
    script = {16: [(300, 1.0)] * 5, 64: [(450, 1.0)] * 5, 256: [(600, 1.0), (600, 1.0), (650, 1.0), (560, 1.0),
                                                             (610, 1.0)]}
    sweep = scripted_sweep(monkeypatch, script, rounds=4, warmup_epochs=1)
    fig = experiments.plot_batch_sweep(sweep, title="t")
    left, right = fig.axes
    ratio_line = right.containers[0].lines[0]      # the errorbar's data line
    assert list(ratio_line.get_xdata()) == [64, 256]
    compared = sweep.compare(256, 16)
    assert ratio_line.get_ydata()[1] == pytest.approx(compared.ratio)
    (bars,) = right.collections                    # the vertical error bars: ratio ± its paired half-width
    low, high = bars.get_segments()[1][:, 1]
    assert (high - low) / 2 == pytest.approx(compared.ci95)
    assert len(experiments.plot_batch_sweep(sweep.table).axes) == 1   # a table alone: one panel


# --- issue 45: the learner's markdown of 00-02 holds no maintainer material --------------------------
MAINTAINER = re.compile(r"\bnbval\b|\bsanitiz|\btest suite\b|\bload average\b|\bpilots?\b|\bcommit\b|"
                        r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", re.I)


@pytest.mark.parametrize("name", ["00_setup", "01_data_parallelism", "02_mirrored_strategy"])
def test_learner_markdown_holds_no_maintainer_material(name: str) -> None:
    cells = nbformat.read(NOTEBOOK_01.parent / f"{name}.ipynb", as_version=4).cells
    generated = re.compile(r"<!-- run-times:begin.*?<!-- run-times:end -->", re.S)   # the recording tool's line
    markdown = [generated.sub("", c.source) for c in cells if c.cell_type == "markdown"
                and not {"solution", "instructor"} & set(c.get("metadata", {}).get("tags", []))]
    found = [m.group(0) for text in markdown for m in MAINTAINER.finditer(text)]
    assert not found, f"{name}: {found} belongs in instructor/notes/{name}.md"


def test_the_maintainer_material_check_can_fail() -> None:
    for text in ("until commit 11f149b", "a pilot at load average 5", "nbval masks it", "the test suite"):
        assert MAINTAINER.search(text), text
    assert not MAINTAINER.search("the ≈ sign; batch 256 over batch 16; 1.2e-07; sha256 of the images")
