"""Tests of course_lib.lessons.ablation (synthetic epoch records, exact arithmetic) and of the flags the
ablation adds to source_code/horovod_fmnist.py (one short real single-process run)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.lessons import ablation
from course_lib.lessons.ablation import Config
from course_lib.training import schedules

ROOT = Path(__file__).resolve().parents[1]


def _run(config: dict, accuracies: list[float], *, steps: int = 10, samples: int = 320,
         epoch_time: float = 2.0) -> dict:
    epochs = []
    for i, acc in enumerate(accuracies):
        event = {"event": "epoch", "epoch": i + 1, "steps": steps, "samples": samples,
                 "epoch_time_s": epoch_time, "test_accuracy": acc, "test_loss": 1.0 - acc,
                 "wall_time_s": 5.0 + (i + 1) * 3.0}
        epochs.append(event)
    return {"config": {"workers": 1, "global_batch": 32, "optimizer": "adam", "lr": 0.001,
                       "backward_passes_per_step": 1, **config}, "epochs": epochs}


LADDER = [
    Config("baseline", {"--batch-size": 32, "--lr": 0.001}),
    Config("naive 8x", {"--batch-size": 32, "--lr": 0.001, "--backward-passes-per-step": 8},
           parent="baseline"),
    Config("+ LR scaling", {"--batch-size": 32, "--lr": 0.001, "--backward-passes-per-step": 8,
                            "--scale-lr": True}, parent="naive 8x"),
    Config("2 workers", {"--batch-size": 32, "--lr": 0.001, "--backward-passes-per-step": 4,
                         "--scale-lr": False}, parent="naive 8x", workers=2),
]


def test_config_args_switches_and_values() -> None:
    config = Config("x", {"--lr": 0.5, "--scale-lr": True, "--plateau": False, "--seed": None})
    assert config.args() == ["--lr", "0.5", "--scale-lr"]


def test_changes_come_from_the_flags() -> None:
    diff = ablation.changes(LADDER)
    assert diff["baseline"] == ["baseline"]
    assert diff["naive 8x"] == ["+--backward-passes-per-step 8"]
    assert diff["+ LR scaling"] == ["+--scale-lr"]
    assert diff["2 workers"] == ["--backward-passes-per-step 8 -> 4", "workers 1 -> 2"]
    lamb = Config("LAMB", {**LADDER[2].flags, "--optimizer": "lamb"}, parent="+ LR scaling")
    assert ablation.changes([*LADDER, lamb])["LAMB"] == ["+--optimizer lamb"]
    unscaled = Config("off", {**LADDER[2].flags, "--scale-lr": False}, parent="+ LR scaling")
    assert ablation.changes([*LADDER, unscaled])["off"] == ["---scale-lr"]


def test_changes_rejects_bad_ladders() -> None:
    with pytest.raises(ValueError, match="not an earlier configuration"):
        ablation.changes([Config("b", parent="a"), Config("a")])
    with pytest.raises(ValueError, match="named 'a'"):
        ablation.changes([Config("a"), Config("a")])


def test_emulation_says_how_the_batch_was_made() -> None:
    assert ablation.emulation(1, 1) == "none"
    assert ablation.emulation(1, 8) == "accumulation x8"
    assert ablation.emulation(2, 1) == "2 workers"
    assert ablation.emulation(2, 4) == "2 workers + accumulation x4"


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


def test_time_to_accuracy_counts_what_ran() -> None:
    run = _run({}, [0.5, 0.79, 0.80, 0.85], steps=47, samples=6000)
    reach = ablation.time_to_accuracy(run["epochs"], 0.80, backward_passes_per_step=8)
    assert reach["reached"] and reach["epoch"] == 3
    assert reach["samples"] == 18000 and reach["steps"] == 141
    assert reach["updates"] == 141 // 8 == 17  # partial accumulation carries over
    assert reach["train_time_s"] == pytest.approx(6.0) and reach["wall_time_s"] == 14.0


def test_time_to_accuracy_not_reached_and_errors() -> None:
    run = _run({}, [0.5, 0.6])
    reach = ablation.time_to_accuracy(run["epochs"], 0.8)
    assert reach == {"reached": False, "epoch": None, "samples": None, "steps": None,
                     "updates": None, "train_time_s": None, "wall_time_s": None}
    with pytest.raises(ValueError, match="0..1"):
        ablation.time_to_accuracy(run["epochs"], 80)
    del run["epochs"][0]["test_accuracy"]
    with pytest.raises(ValueError, match="--eval-every-epoch"):
        ablation.time_to_accuracy(run["epochs"], 0.8)


def test_epoch_table_is_cumulative() -> None:
    table = ablation.epoch_table({"a": _run({"backward_passes_per_step": 4}, [0.5, 0.7], steps=10)})
    assert table["samples"].tolist() == [320, 640]
    assert table["steps"].tolist() == [10, 20]
    assert table["updates"].tolist() == [2, 5]
    assert table["train_time_s"].tolist() == [2.0, 4.0]


def test_summary_table_and_verdict() -> None:
    runs = {
        "baseline": _run({}, [0.70, 0.82, 0.86], steps=80),
        "naive 8x": _run({"backward_passes_per_step": 8, "global_batch": 256}, [0.5, 0.6, 0.7]),
        "+ LR scaling": _run({"backward_passes_per_step": 8, "global_batch": 256, "lr": 0.008},
                             [0.6, 0.8, 0.855]),
        "2 workers": _run({"workers": 2, "backward_passes_per_step": 4}, [0.4, 0.5, 0.6]),
    }
    summary = ablation.summary_table(LADDER, runs, target=0.80)
    assert list(summary.index) == [c.name for c in LADDER]
    row = summary.loc["+ LR scaling"]
    assert row["changes"] == "+--scale-lr" and row["emulation"] == "accumulation x8"
    assert row["samples"] == 960 and row["steps"] == 30 and row["updates"] == 3
    assert row["epoch_to_target"] == 2 and row["updates_to_target"] == 2
    assert summary.loc["naive 8x", "updates_to_target"] == "not reached"
    assert summary.loc["baseline", "updates"] == 240
    assert summary.loc["2 workers", "emulation"] == "2 workers + accumulation x4"

    result = ablation.verdict(summary, "baseline", ["naive 8x", "+ LR scaling"])
    assert result["best"] == "+ LR scaling" and result["within"]
    assert result["gap"] == pytest.approx(0.005)
    strict = ablation.verdict(summary, "baseline", ["naive 8x", "+ LR scaling"], tolerance=0.001)
    assert not strict["within"]
    with pytest.raises(KeyError, match="no row 'LARS'"):
        ablation.verdict(summary, "baseline", ["LARS"])
    with pytest.raises(ValueError, match="no run for configuration"):
        ablation.summary_table(LADDER, {"baseline": runs["baseline"]}, 0.8)


def test_plot_curves_has_two_panels() -> None:
    import matplotlib

    matplotlib.use("Agg")
    table = ablation.epoch_table({"a": _run({}, [0.5, 0.7]), "b": _run({}, [0.6, 0.8])})
    fig = ablation.plot_curves(table, target=0.8, title="t")
    assert len(fig.axes) == 2
    assert len(fig.axes[0].lines) == 3  # two configurations + target line


def test_import_does_not_start_tensorflow() -> None:
    code = "import sys, course_lib.lessons.ablation; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.slow
def test_script_eval_every_epoch_accumulation_scaling_and_warmup() -> None:
    """A real 1-process run: k=4 accumulation, LR scaled by 4, one warm-up epoch."""
    train, batch, k = 512, 32, 4
    cmd = [sys.executable, str(ROOT / "source_code" / "horovod_fmnist.py"), "--train-subset",
           str(train), "--test-subset", "256", "--batch-size", str(batch),
           "--backward-passes-per-step", str(k), "--epochs", "2", "--lr", "0.001", "--scale-lr",
           "--warmup-epochs", "1", "--eval-every-epoch", "--json", "--deterministic",
           "--threads-per-worker", "1"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    (config,) = [e for e in events if e["event"] == "config"]
    assert config["lr"] == pytest.approx(0.001 * k) and config["eval_every_epoch"] is True
    epochs = [e for e in events if e["event"] == "epoch"]
    steps = math.ceil(train / batch)
    assert [e["steps"] for e in epochs] == [steps, steps]
    for event in epochs:
        assert 0.0 <= event["test_accuracy"] <= 1.0 and math.isfinite(event["test_loss"])
    assert 0 < epochs[0]["wall_time_s"] < epochs[1]["wall_time_s"]
    # The warm-up ramp ends at the scaled LR after its last epoch.
    assert epochs[0]["lr"] == pytest.approx(0.001 * k, rel=1e-5)
    (result,) = [e for e in events if e["event"] == "result"]
    assert result["test_accuracy"] == pytest.approx(epochs[-1]["test_accuracy"])
