"""Tests of course_lib.lessons.mirrored_strategy.mirrored_rounds: notebook 02's paired scaling table (the interval
the verdict uses is the one tabulated and plotted, review E-8) and the sentences written from its verdicts (issue 44 item 3)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest

from course_lib.lessons.common import scaling
from course_lib.lessons.common.scaling import MixedScalingError, RunRecord
from course_lib.lessons.mirrored_strategy import mirrored_rounds
from course_lib.training.stats import mean_ci95

NOTEBOOK_02 = Path(__file__).resolve().parents[1] / "notebooks" / "02_mirrored_strategy.ipynb"


def record(devices: int, per_device: int, global_batch: int, rates: list[float]) -> RunRecord:
    return RunRecord(devices, per_device, global_batch, sum(rates) / len(rates), extra={"round_rates": rates})


A = [300.0, 200.0, 310.0, 180.0, 290.0, 305.0]          # one device, batch 64: the machine drifts a lot
C = [r * f for r, f in zip(A, [0.90, 0.92, 0.91, 0.93, 0.90, 0.92])]   # 2 replicas: ≈0.91 of A, every round


def test_the_paired_table_takes_the_round_by_round_ratios() -> None:
    table = mirrored_rounds.scaling_pair(record(1, 64, 64, A), record(2, 64, 128, C), mode="weak")
    speedup, half = mean_ci95([c / a for c, a in zip(C, A)])
    row = table.iloc[1]
    assert row["speedup"] == pytest.approx(speedup) and row["speedup_ci95"] == pytest.approx(half)
    assert row["efficiency"] == pytest.approx(speedup / 2) and row["efficiency_ci95"] == pytest.approx(half / 2)
    assert row["images_per_sec"] == pytest.approx(np.mean(C)) and row["rounds"] == 6
    assert list(table.iloc[0][["speedup", "efficiency", "efficiency_ci95"]]) == [1.0, 1.0, 0.0]
    assert table.attrs["paired"] is True
    unpaired = scaling.scaling_table(
        [RunRecord(1, 64, 64, np.mean(A), extra={"images_per_sec_ci95": mean_ci95(A)[1]}),
         RunRecord(2, 64, 128, np.mean(C), extra={"images_per_sec_ci95": mean_ci95(C)[1]})], mode="weak")
    # the drift of the machine widens the unpaired interval ten-fold; the paired one cancels it
    assert unpaired.iloc[1]["efficiency_ci95"] > 10 * row["efficiency_ci95"]


@pytest.mark.parametrize(("baseline", "scaled", "message"), [
    (record(2, 64, 128, A), record(2, 64, 128, C), "must have 1 device"),
    (RunRecord(1, 64, 64, 300.0), record(2, 64, 128, C), r"needs extra\['round_rates'\]"),
    (record(1, 64, 64, A), record(2, 64, 128, C[:5]), "the same rounds: 6 against 5"),
    (record(1, 64, 64, [300.0, -1.0]), record(2, 64, 128, [1.0, 2.0]), "positive images/s"),
])
def test_the_paired_table_refuses_what_it_cannot_pair(baseline, scaled, message) -> None:
    with pytest.raises(ValueError, match=message):
        mirrored_rounds.scaling_pair(baseline, scaled, mode="weak")


def test_the_paired_table_keeps_the_weak_strong_rule() -> None:
    with pytest.raises(MixedScalingError):
        mirrored_rounds.scaling_pair(record(1, 64, 64, A), record(2, 64, 128, C), mode="strong")


def test_the_figure_labels_the_paired_interval() -> None:
    table = mirrored_rounds.scaling_pair(record(1, 64, 64, A), record(2, 64, 128, C), mode="weak")
    fig = scaling.plot_scaling(table)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert "measured (paired 95 % interval, the verdict's)" in labels
    (bars,) = fig.axes[1].collections
    low, high = bars.get_segments()[1][:, 1]
    assert (high - low) / 2 == pytest.approx(100 * table.iloc[1]["efficiency_ci95"])
    plain = scaling.plot_scaling(scaling.scaling_table([RunRecord(1, 64, 64, 300.0), RunRecord(2, 64, 128, 500.0)]))
    assert "measured (95 % interval)" in [t.get_text() for t in plain.axes[1].get_legend().get_texts()]


# --- the words follow the verdicts -----------------------------------------------------------------
def pair(factor: float, spread: float, mode: str = "strong") -> Any:
    """A paired table whose speed-up is ``factor`` with per-round noise ``spread`` (relative)."""
    base = [400.0, 380.0, 420.0, 390.0, 410.0, 400.0]
    noise = [1 + spread * s for s in (1, -1, 1, -1, 0.5, -0.5)]
    scaled = [b * factor * n for b, n in zip(base, noise)]
    baseline = record(1, 128 if mode == "strong" else 64, 128 if mode == "strong" else 64, base)
    return mirrored_rounds.scaling_pair(baseline, record(2, 64, 128, scaled), mode=mode)


STRONG = {"True": pair(1.3, 0.02), "False": pair(0.85, 0.02), "cannot tell": pair(1.0, 0.3)}
WEAK = {"True": pair(1.3, 0.02, "weak"), "False": pair(0.85, 0.02, "weak"), "cannot tell": pair(1.0, 0.3, "weak")}


@pytest.mark.parametrize("verdict", sorted(STRONG))
def test_the_verdicts_come_out_each_way(verdict: str) -> None:
    assert mirrored_rounds.speedup_verdict(STRONG[verdict]) == verdict
    assert mirrored_rounds.speedup_verdict(WEAK[verdict]) == verdict
    weak_line, strong_line = mirrored_rounds.verdict_lines(WEAK[verdict], STRONG[verdict])
    assert weak_line.startswith("measured: 2 replicas process more images/s than 1 replica at per-replica batch 64")
    assert strong_line.startswith("measured: 2 replicas beat one device with the same global batch 128")
    assert f"(strong speed-up ≥ 1): {verdict} (speed-up ≈" in strong_line


def test_the_reading_and_the_summary_change_with_the_strong_verdict() -> None:
    readings = {v: mirrored_rounds.reading(WEAK["cannot tell"], t) for v, t in STRONG.items()}
    summaries = {v: mirrored_rounds.summary(t) for v, t in STRONG.items()}
    assert len(set(readings.values())) == 3 and len(set(summaries.values())) == 3
    assert "processed more images per second than one device" in readings["True"]
    assert "processed fewer images per second than one device" in readings["False"]
    assert "cannot tell 2 simulated replicas from one device" in readings["cannot tell"]
    # "splitting cost more than it gained" only when the run measured the replicas slower (the old summary's
    # "here that is overhead, not speed-up" was written whatever the verdict)
    for verdict, text in readings.items():
        assert ("cost more than it gained" in text) == (verdict == "False"), verdict
    assert "were faster than" in summaries["True"] and "were slower than" in summaries["False"]
    assert "were not told apart from" in summaries["cannot tell"]


def test_the_reading_follows_the_weak_verdict_too() -> None:
    texts = {v: mirrored_rounds.reading(w, STRONG["cannot tell"]) for v, w in WEAK.items()}
    assert "they processed more images per second" in texts["True"]
    assert "they processed fewer images per second" in texts["False"]
    assert "(weak scaling) this run cannot tell" in texts["cannot tell"]


def test_train_in_rounds_refuses_a_design_without_counted_rounds() -> None:
    with pytest.raises(ValueError, match="rounds >= 2"):
        mirrored_rounds.train_in_rounds({"A": (["/cpu:0"], 64)}, np.zeros((8, 28, 28), np.uint8), np.zeros(8), rounds=1)


def test_notebook_02_shows_the_words_of_its_verdicts() -> None:
    cells = nbformat.read(NOTEBOOK_02, as_version=4).cells
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    for call in ("mirrored_rounds.scaling_pair(", "mirrored_rounds.verdict_lines(", "mirrored_rounds.reading(",
                 "mirrored_rounds.summary("):
        assert call in code, f"02 no longer calls {call}"
    assert "scaling.scaling_table(" not in code, "02's table must show the paired interval its verdict uses"
    summary_at = next(i for i, c in enumerate(cells) if c.source.startswith("## Summary"))
    assert "mirrored_rounds.summary(" in cells[summary_at + 1].source
    generated = re.compile(r"<!-- run-times:begin.*?<!-- run-times:end -->", re.S)   # the recording tool's line
    markdown = "\n".join(generated.sub("", c.source) for c in cells if c.cell_type == "markdown")
    for claim in ("overhead, not speed-up", "a strong speed-up near or below 1 is what the machine allows",
                  "load average", "pilot", "nbval", "test suite"):
        assert claim not in markdown, claim
