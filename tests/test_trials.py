"""Tests of course_lib.lessons.large_batch.trials: what one in-process run of notebook 04 records (a short real run)."""

from __future__ import annotations

import pytest

SETTINGS = {"optimizer": "sgd", "base_lr": 0.01, "base_batch": 32, "batch": 32}


def test_train_trial_records_losses_epoch_times_and_can_skip_the_test_set() -> None:
    """A tuning run (test=False) never evaluates the test set; every run records what 04 reads."""
    import numpy as np

    from course_lib.lessons.large_batch import trials

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(96, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=96).astype(np.int64)
    poisoned = trials.Split(images[:64], labels[:64], images[64:], labels[64:],
                            None, None)   # reading the test set would fail
    settings = {**SETTINGS, "batch": 32, "lr_scaling": "linear", "warmup_epochs": 1}
    trial = trials.train_trial(settings, 0, poisoned, epochs=2, test=False)
    assert trial.test_accuracy is None and trial.test_loss is None
    assert trial.updates == 4 and [u for u, _ in trial.val_curve] == [2, 4]
    assert len(trial.loss_curve) == 2 and len(trial.epoch_s) == 2
    assert all(t > 0 for t in trial.epoch_s) and sum(trial.epoch_s) <= trial.train_s
    with pytest.raises(ValueError, match="does not divide"):
        trials.train_trial({**settings, "batch": 48}, 0, poisoned, epochs=1, test=False)
    # Checks inside an epoch resolve the curve finer and change nothing else (predict, not evaluate,
    # so the training loss fit averages is not reset).
    fine = trials.train_trial(settings, 0, poisoned, epochs=2, test=False, checks_per_epoch=2)
    assert [u for u, _ in fine.val_curve] == [1, 2, 3, 4] and fine.epochs == 2
    assert [a for _, a in fine.val_curve[1::2]] == pytest.approx([a for _, a in trial.val_curve])
    assert fine.loss_curve == pytest.approx(trial.loss_curve)
    with pytest.raises(ValueError, match="checks_per_epoch"):
        trials.train_trial(settings, 0, poisoned, epochs=1, test=False, checks_per_epoch=3)


def test_train_trial_tests_with_the_predict_of_the_checks() -> None:
    """The test set is scored from predict's logits (no second traced function): on the validation images
    it gives exactly the last check's accuracy, and the loss is the mean cross-entropy of the logits."""
    import numpy as np

    from course_lib.lessons.large_batch import trials

    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(96, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=96).astype(np.int64)
    same = trials.Split(images[:64], labels[:64], images[64:], labels[64:], images[64:], labels[64:])
    trial = trials.train_trial({**SETTINGS, "batch": 32}, 0, same, epochs=1, eval_batch=16)
    assert trial.test_accuracy == trial.val_accuracy
    assert 0 < trial.test_loss < 10
    loss, accuracy = trials._loss_and_accuracy(np.zeros((4, 10), np.float32), np.array([0, 1, 2, 3]))
    assert loss == pytest.approx(np.log(10)) and accuracy == 0.25   # ties: argmax takes class 0
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]], np.float32)
    expected = -np.mean([2 - np.log(np.exp([2, 0, -1]).sum()), -np.log(np.exp([0, 3, 0]).sum())])
    assert trials._loss_and_accuracy(logits, np.array([0, 0])) == (pytest.approx(expected), 0.5)
