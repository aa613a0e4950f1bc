"""The runner of notebook 04 reuses one traced model; a run must not depend on what ran before it."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.lessons.large_batch import trials

SGD = {"optimizer": "sgd", "base_lr": 0.01, "base_batch": 16, "batch": 16}


def _split(seed: int = 0) -> trials.Split:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(128, 28, 28), dtype=np.uint8)
    labels = (images[:, 10:18, 10:18].mean(axis=(1, 2)) // 26).astype(np.int64)   # learnable
    return trials.Split(images[:64], labels[:64], images[64:96], labels[64:96], images[96:], labels[96:])


@pytest.fixture(scope="module")
def runner() -> trials.TrialRunner:
    return trials.TrialRunner()


def test_a_run_repeats_bit_for_bit_whatever_ran_before(runner: trials.TrialRunner) -> None:
    """Weights, optimizer slots and step counter, schedule and dropout are all reset: a seed run after
    another configuration (another optimizer, a warm-up) gives exactly its first result."""
    split = _split()
    first = trials.train_trial(SGD, 3, split, epochs=2, runner=runner, checks_per_epoch=2)
    trials.train_trial({**SGD, "optimizer": "adam", "batch": 32, "lr_scaling": "sqrt", "warmup_epochs": 1},
                       4, split, epochs=1, runner=runner)
    trials.train_trial({**SGD, "batch": 32, "base_lr": 0.5}, 3, split, epochs=1, runner=runner)
    again = trials.train_trial(SGD, 3, split, epochs=2, runner=runner, checks_per_epoch=2)
    for key in ("val_curve", "loss_curve", "test_accuracy", "test_loss", "updates"):
        assert getattr(again, key) == getattr(first, key), key
    assert first.updates == 8 and [u for u, _ in first.val_curve] == [2, 4, 6, 8]
    other = trials.train_trial(SGD, 5, split, epochs=2, runner=runner, checks_per_epoch=2)
    assert other.loss_curve != first.loss_curve    # the seed matters (weights, order, dropout)


def test_a_reused_runner_trains_like_a_fresh_one(runner: trials.TrialRunner) -> None:
    """A run on the shared runner equals the same run on a runner built for it alone."""
    split = _split(1)
    settings = {**SGD, "optimizer": "lamb", "batch": 32, "lr_scaling": "linear", "warmup_epochs": 0.5}
    trials.train_trial(SGD, 0, split, epochs=1, runner=runner)
    shared = trials.train_trial(settings, 2, split, epochs=2, runner=runner)
    alone = trials.train_trial(settings, 2, split, epochs=2, runner=trials.TrialRunner())
    assert shared.loss_curve == alone.loss_curve and shared.test_accuracy == alone.test_accuracy


@pytest.mark.parametrize("warmup", [0, 1, 5])
def test_the_rate_is_the_course_warmup_schedule(runner: trials.TrialRunner, warmup: int) -> None:
    """The variables' schedule gives schedules.linear_warmup's rate at every update (the peak without one)."""
    from course_lib.training import schedules

    peak, growth = 0.08, 8.0
    runner.set_rate(peak, peak / growth, warmup)
    reference = schedules.linear_warmup(peak, warmup, growth) if warmup else (lambda step: peak)
    for step in range(8):
        assert float(runner.rate(step)) == pytest.approx(float(reference(step)), rel=1e-6), step


def test_a_narrow_runner_trains_the_narrow_cnn_from_its_seed() -> None:
    """TrialRunner(width=4) (notebook 04) starts each run from build_model(seed, width=4)'s weights."""
    from course_lib.training import models

    narrow = trials.TrialRunner(width=4)
    assert narrow.model.count_params() == models.build_model(seed=0, width=4).count_params()
    narrow.reset("sgd", 7)
    assert models.weights_digest(narrow.model) == models.weights_digest(models.build_model(seed=7, width=4))
