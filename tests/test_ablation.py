"""Tests of course_lib.lessons.ablation (synthetic epoch records, exact arithmetic) and of the flags the
ablation adds to source_code/horovod_fmnist.py (one short real single-process run)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from course_lib.lessons import ablation
from course_lib.lessons.ablation import Config
from course_lib.training import schedules



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


def _trials(accuracies: list[float], *, val: list[list[float]] | None = None,
            updates: int = 24) -> list[dict]:
    val = val or [[0.5, a] for a in accuracies]
    return [{"seed": seed, "test_accuracy": acc, "val_accuracy": curve[-1], "updates": updates,
             "lr": 0.01, "val_curve": [(updates // len(curve) * (i + 1), v)
                                       for i, v in enumerate(curve)]}
            for seed, (acc, curve) in enumerate(zip(accuracies, val))]


SETTINGS = {"optimizer": "sgd", "base_lr": 0.01, "base_batch": 32, "batch": 32}
TRIAL_LADDER = [
    Config("baseline", SETTINGS),
    Config("naive", {**SETTINGS, "batch": 256}, parent="baseline"),
    Config("+ linear", {**SETTINGS, "batch": 256, "lr_scaling": "linear"}, parent="naive"),
]


def test_updates_to_target() -> None:
    curve = [(8, 0.5), (16, 0.79), (24, 0.80)]
    assert ablation.updates_to_target(curve, 0.80) == 24
    assert ablation.updates_to_target(curve, 0.81) is None
    with pytest.raises(ValueError, match="0..1"):
        ablation.updates_to_target(curve, 80)


def test_target_from_baseline_reads_validation_only() -> None:
    baseline = _trials([0.10, 0.10], val=[[0.5, 0.70], [0.6, 0.80]])   # test accuracies must not matter
    assert ablation.target_from_baseline(baseline, 0.9) == pytest.approx(0.9 * 0.75)
    assert ablation.target_from_baseline(baseline, 1.0) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="fraction"):
        ablation.target_from_baseline(baseline, 90)
    with pytest.raises(ValueError, match="no trials"):
        ablation.target_from_baseline([], 0.9)


def test_seed_table_takes_a_target_per_row() -> None:
    runs = {"baseline": _trials([0.85, 0.86, 0.84], updates=192),
            "naive": _trials([0.70, 0.72, 0.71], val=[[0.5, 0.6]] * 3),
            "+ linear": _trials([0.70, 0.73, 0.71], val=[[0.5, 0.6]] * 3)}
    targets = {"baseline": 0.8, "naive": 0.8, "+ linear": 0.55}
    table = ablation.seed_table(TRIAL_LADDER, runs, target=targets)
    assert table.loc["naive", "updates_to_target"] == "not reached"
    assert table.loc["+ linear", "updates_to_target"] == 24   # second of two points, 12 updates apart


def test_paired_difference_and_decide() -> None:
    mean, half = ablation.paired_difference(_trials([0.80, 0.82, 0.81]), _trials([0.70, 0.71, 0.72]))
    assert mean == pytest.approx(0.10)
    # differences 0.10, 0.11, 0.09: sd 0.01, t(2) = 4.303
    assert half == pytest.approx(4.303 * 0.01 / math.sqrt(3), rel=1e-3)
    assert ablation.decide(mean, half, 0.0) == "above"
    assert ablation.decide(mean, half, 0.2) == "below"
    assert ablation.decide(mean, half, 0.1) == "cannot tell"
    with pytest.raises(ValueError, match="at least 2 seeds"):
        ablation.paired_difference(_trials([0.8]), _trials([0.7]))


def test_seed_table_and_ladder_table() -> None:
    runs = {"baseline": _trials([0.85, 0.86, 0.84], updates=192),
            "naive": _trials([0.70, 0.72, 0.71], val=[[0.5, 0.6]] * 3),
            "+ linear": _trials([0.70, 0.73, 0.71])}
    table = ablation.seed_table(TRIAL_LADDER, runs, target=0.80)
    assert list(table.index) == ["baseline", "naive", "+ linear"]
    assert table.loc["naive", "changes"] == "batch 32 -> 256"
    assert table.loc["+ linear", "changes"] == "+lr_scaling linear"
    assert table.loc["baseline", "test_accuracy"] == pytest.approx(0.85)
    assert table.loc["baseline", "seeds"] == 3 and table.loc["baseline", "updates"] == 192
    assert table.loc["baseline", "updates_to_target"] == 192
    assert table.loc["naive", "updates_to_target"] == "not reached"
    steps = ablation.ladder_table(TRIAL_LADDER, runs)
    assert steps.loc["naive", "verdict"] == "worse"
    assert steps.loc["+ linear", "verdict"] == "cannot tell"
    with pytest.raises(ValueError, match="no trials"):
        ablation.seed_table(TRIAL_LADDER, {"baseline": runs["baseline"]}, 0.8)


def test_plot_curves_has_two_panels() -> None:
    import matplotlib

    matplotlib.use("Agg")
    runs = {"baseline": _trials([0.85, 0.86]), "naive": _trials([0.7, 0.72]),
            "+ linear": _trials([0.75, 0.74])}
    fig = ablation.plot_curves(TRIAL_LADDER, runs, images_per_epoch=2048, target=0.8, title="t")
    assert len(fig.axes) == 2
    assert len(fig.axes[0].lines) == 4  # three configurations + target line


def _curves(reach: list[int], updates: int) -> list[dict]:
    """Trials whose validation first reaches 0.8 after ``reach[seed]`` updates (checks every update)."""
    return [{"seed": seed, "val_curve": [(u, 0.9 if u >= r else 0.5) for u in range(1, updates + 1)]}
            for seed, r in enumerate(reach)]


def test_images_ratio_pairs_seeds() -> None:
    small, large = _curves([96, 96, 48], 192), _curves([12, 6, 6], 24)
    mean, half = ablation.images_ratio(large, small, 128, 16, 0.8)
    # per seed: 12*128/(96*16) = 1.0, 6*128/(96*16) = 0.5, 6*128/(48*16) = 1.0
    assert mean == pytest.approx(2.5 / 3)
    assert half > 0
    assert ablation.images_ratio(_curves([12, 30], 24), small[:2], 128, 16, 0.8) is None   # never reached


def test_time_to_target_winner_can_come_out_each_way() -> None:
    assert ablation.time_to_target_winner((0.8, 0.1), (1.4, 0.2)) == "large batch"
    assert ablation.time_to_target_winner((2.0, 0.1), (1.4, 0.2)) == "small batch"
    assert ablation.time_to_target_winner((1.3, 0.1), (1.4, 0.2)) == "cannot tell"
    assert ablation.time_to_target_winner((1.3, math.nan), (1.6, 0.2)) == "large batch"   # one seed: no spread
    assert ablation.time_to_target_winner(None, (9.0, 0.1)) == "small batch"              # never reached


def test_explain_claims_a_mechanism_only_when_the_rung_measured_better() -> None:
    assert ablation.explain("better", "the ramp helps") == "the ramp helps"
    assert ablation.explain("worse", "the ramp helps") == "proposed: the ramp helps; not shown here (worse)"
    assert "not shown" in ablation.explain("cannot tell", "the ramp helps")


def test_the_rung_verdicts_of_04_can_come_out_the_other_way() -> None:
    """Fed numbers where they must flip: the recipe beats naive, loses to it, or cannot tell."""
    close, naive = _trials([0.80, 0.805, 0.82]), _trials([0.60, 0.62, 0.61])
    assert ablation.decide(*ablation.paired_difference(close, naive)) == "above"
    assert ablation.decide(*ablation.paired_difference(naive, close)) == "below"
    assert ablation.decide(*ablation.paired_difference(_trials([0.61, 0.60, 0.62]), naive)) == "cannot tell"


def _timed(seconds: list[float], seeds: list[int] | None = None) -> list[dict]:
    """Trials of two epochs, each epoch taking ``seconds[seed]``."""
    return [{"seed": seed, "epoch_s": [s, s]} for seed, s in zip(seeds or range(len(seconds)), seconds)]


def test_paired_speed_ratio_pairs_each_round() -> None:
    # round 0: small 2 s/epoch, larges 1 s and 0.5 s -> 100 and 200 images/s against 50: mean 3.0
    # round 1: the machine slowed down 2x for every run of the round: the same ratio, 3.0
    small = _timed([2.0, 4.0])
    large = [_timed([1.0, 2.0]), _timed([0.5, 1.0])]
    assert ablation.paired_speed_ratio([(small, large)], 100) == (pytest.approx(3.0), pytest.approx(0.0))
    # two ladders with the same seeds are two sets of rounds, not one
    other = (_timed([1.0]), [_timed([1.0])])
    mean, half = ablation.paired_speed_ratio([(small, large), other], 100)
    assert mean == pytest.approx(7 / 3) and half > 0
    # a seed the large rows did not run is no round; no round at all is an error
    assert ablation.paired_speed_ratio([(_timed([2.0, 4.0, 9.0]), large)], 100)[0] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="no round"):
        ablation.paired_speed_ratio([(_timed([2.0], [7]), large)], 100)


def test_import_does_not_start_tensorflow() -> None:
    code = "import sys, course_lib.lessons.ablation; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# The script's --eval-every-epoch, --scale-lr with accumulation and --warm-up epochs: one launch in
# tests/test_scripts.py::test_eval_every_epoch_accumulation_scaling_and_warmup (issue 31; was a run here).


def test_train_trial_records_losses_epoch_times_and_can_skip_the_test_set() -> None:
    """A tuning run (test=False) never evaluates the test set; every run records what 04 reads."""
    import numpy as np

    from course_lib.lessons import trials

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(96, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=96).astype(np.int64)
    poisoned = trials.Split(images[:64], labels[:64], images[64:], labels[64:],
                            None, None)   # reading the test set would fail
    settings = {**SETTINGS, "batch": 32, "lr_scaling": "linear", "warmup_epochs": 1}
    trial = trials.train_trial(settings, 0, poisoned, epochs=2, test=False)
    assert trial["test_accuracy"] is None and trial["test_loss"] is None
    assert trial["updates"] == 4 and [u for u, _ in trial["val_curve"]] == [2, 4]
    assert len(trial["loss_curve"]) == 2 and len(trial["epoch_s"]) == 2
    assert all(t > 0 for t in trial["epoch_s"]) and sum(trial["epoch_s"]) <= trial["train_s"]
    with pytest.raises(ValueError, match="does not divide"):
        trials.train_trial({**settings, "batch": 48}, 0, poisoned, epochs=1, test=False)
    # Checks inside an epoch resolve the curve finer and change nothing else (predict, not evaluate,
    # so the training loss fit averages is not reset).
    fine = trials.train_trial(settings, 0, poisoned, epochs=2, test=False, checks_per_epoch=2)
    assert [u for u, _ in fine["val_curve"]] == [1, 2, 3, 4] and fine["epochs"] == 2
    assert [a for _, a in fine["val_curve"][1::2]] == pytest.approx([a for _, a in trial["val_curve"]])
    assert fine["loss_curve"] == pytest.approx(trial["loss_curve"])
    with pytest.raises(ValueError, match="checks_per_epoch"):
        trials.train_trial(settings, 0, poisoned, epochs=1, test=False, checks_per_epoch=3)


def test_train_trial_tests_with_the_predict_of_the_checks() -> None:
    """The test set is scored from predict's logits (no second traced function): on the validation images
    it gives exactly the last check's accuracy, and the loss is the mean cross-entropy of the logits."""
    import numpy as np

    from course_lib.lessons import trials

    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(96, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=96).astype(np.int64)
    same = trials.Split(images[:64], labels[:64], images[64:], labels[64:], images[64:], labels[64:])
    trial = trials.train_trial({**SETTINGS, "batch": 32}, 0, same, epochs=1, eval_batch=16)
    assert trial["test_accuracy"] == trial["val_accuracy"]
    assert 0 < trial["test_loss"] < 10
    loss, accuracy = trials._loss_and_accuracy(np.zeros((4, 10), np.float32), np.array([0, 1, 2, 3]))
    assert loss == pytest.approx(np.log(10)) and accuracy == 0.25   # ties: argmax takes class 0
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]], np.float32)
    expected = -np.mean([2 - np.log(np.exp([2, 0, -1]).sum()), -np.log(np.exp([0, 3, 0]).sum())])
    assert trials._loss_and_accuracy(logits, np.array([0, 0])) == (pytest.approx(expected), 0.5)
