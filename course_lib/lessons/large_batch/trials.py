"""In-process training runs of the large-batch ladder: one (configuration, seed) per call.

Notebook 04 trains many short runs (every row with several seeds); starting a script per run would
cost more than the training. The runs here use the same course pieces as
``source_code/horovod_fmnist.py`` (model, data order, dropout reseeding, optimizers, warm-up in
updates) and REAL batches: a batch of 256 fits in memory, so nothing is emulated. Gradient
accumulation (``--backward-passes-per-step``) is the way to get the same update when it does not fit;
tests/test_accumulation.py proves the update is identical. Every run trains on a
:class:`~course_lib.lessons.large_batch.trial_runner.TrialRunner` (one model traced once, reset for each run) in a
loop of its own: the batches of ``pipeline.epoch_indices``, dropout reseeded per epoch, validation
checks and the test pass by one traced prediction function. What a run gives back is a :class:`Trial`, the one
record that the ladder's tables, verdicts and the recovered fraction read.

A configuration's ``settings`` (the ``flags`` of :class:`course_lib.lessons.large_batch.ladder.Config`):
``optimizer``, ``base_lr`` (rate at ``base_batch``), ``base_batch``, ``batch`` (global batch of
every update), ``lr_scaling`` (``"none"``, ``"linear"`` = × batch/base_batch, ``"sqrt"`` =
× sqrt of it) and ``warmup_epochs`` (linear ramp from ``base_lr`` to the scaled rate, 0 = none).

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal, Mapping, NamedTuple

import numpy as np

from course_lib.lessons.large_batch.trial_runner import TrialRunner
from course_lib.training import data

__all__ = ["AccuracyKey", "Split", "Trial", "TrialRunner", "carve_validation", "peak_lr", "train_trial"]

#: The accuracies a trial records: on the test set, or at its last validation check.
AccuracyKey = Literal["test_accuracy", "val_accuracy"]


@dataclass(frozen=True)
class Trial:
    """One run of the large-batch ladder: one configuration trained with one seed.

    Attributes:
        seed: Weights, data order and dropout masks (the same seed in two rows = paired runs).
        epochs: Passes over the training images.
        updates: Optimizer updates made.
        val_curve: ``(updates, validation accuracy)`` at every validation check, in order.
        val_accuracy: The last check's validation accuracy.
        loss_curve: Mean training loss per epoch.
        epoch_s: Training seconds per epoch (validation excluded).
        test_accuracy: Accuracy on the test set; ``None`` when the run did not read it.
        test_loss: Mean cross-entropy on the test set; ``None`` when the run did not read it.
        lr: The learning rate after scaling (:func:`peak_lr`).
        train_s: Seconds of the whole training loop, validation included.

    Introduced in notebooks/04_large_batch.ipynb.
    """

    seed: int
    epochs: int
    updates: int
    val_curve: tuple[tuple[int, float], ...]
    val_accuracy: float
    loss_curve: tuple[float, ...]
    epoch_s: tuple[float, ...]
    test_accuracy: float | None
    test_loss: float | None
    lr: float
    train_s: float

    def accuracy(self, key: AccuracyKey = "test_accuracy") -> float:
        """The run's test accuracy, or its last validation accuracy (``key="val_accuracy"``).

        Raises:
            ValueError: The test accuracy of a run that did not read the test set.
        """
        value = self.test_accuracy if key == "test_accuracy" else self.val_accuracy
        if value is None:
            raise ValueError(f"the run of seed {self.seed} did not read the test set (train_trial(..., test=False)); "
                             "compare its val_accuracy instead")
        return value


class Split(NamedTuple):
    """Training, validation (carved from the training set) and test arrays."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def carve_validation(train_size: int, val_size: int, test_size: int = 10_000) -> Split:
    """First ``train_size`` training images for training, the next ``val_size`` for validation,
    and the first ``test_size`` test images (used only for the final report, never for tuning).

    Args:
        train_size: Training images, >= 1.
        val_size: Validation images, >= 1; ``train_size + val_size`` <= 60 000.
        test_size: Test images, 1..10 000.

    Returns:
        A :class:`Split`; the validation images are disjoint from the training images.

    Raises:
        ValueError: Sizes out of range.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if train_size < 1 or val_size < 1 or train_size + val_size > 60_000 or not 1 <= test_size <= 10_000:
        raise ValueError(f"need train_size, val_size >= 1, their sum <= 60000 and 1 <= test_size <= 10000; "
                         f"got {train_size} + {val_size}, {test_size}")
    arrays = data.load_arrays(train_subset=train_size + val_size)
    return Split(arrays.x_train[:train_size], arrays.y_train[:train_size],
                 arrays.x_train[train_size:], arrays.y_train[train_size:],
                 arrays.x_test[:test_size], arrays.y_test[:test_size])


def peak_lr(settings: Mapping[str, Any]) -> float:
    """The learning rate after scaling: ``base_lr`` × growth (linear) or × sqrt(growth) (sqrt).

    Raises:
        ValueError: An unknown ``lr_scaling``.
    """
    growth = settings["batch"] / settings["base_batch"]
    rule = settings.get("lr_scaling", "none")
    factors = {"none": 1.0, "linear": growth, "sqrt": math.sqrt(growth)}
    if rule not in factors:
        raise ValueError(f"lr_scaling must be one of {sorted(factors)}, got {rule!r}")
    return float(settings["base_lr"]) * factors[rule]


def train_trial(settings: Mapping[str, Any], seed: int, split: Split, *, epochs: int,
                eval_batch: int = 500, test: bool = True, checks_per_epoch: int = 1,
                runner: TrialRunner | None = None) -> Trial:
    """Train one configuration with one seed; validate ``checks_per_epoch`` times an epoch, test once
    at the end.

    Args:
        settings: See the module docstring.
        seed: Weights, data order and dropout masks (the same seed in two rows = paired runs).
        split: From :func:`carve_validation`.
        epochs: Passes over the training images (the same for every row: equal sample budget).
        eval_batch: Batch of the evaluations.
        test: Evaluate on the test set at the end; tuning runs pass ``False`` (they must not read
            it, and skipping it saves the largest evaluation).
        checks_per_epoch: Validations per epoch, at equal fractions of it (after the same number of
            training images in every row, so updates-to-target is resolved finer than an epoch); it
            must divide the updates of an epoch.
        runner: The :class:`~course_lib.lessons.large_batch.trial_runner.TrialRunner` that trains (built once and
            reused by every run of a notebook: no new model, no retracing); ``None`` builds one.

    Returns:
        A :class:`Trial` (its test values are ``None`` when ``test`` is False; both come from the logits,
        the loss as the mean cross-entropy).

    Raises:
        ValueError: ``batch`` does not divide the training images (every update must see a full
            batch), ``checks_per_epoch`` does not divide the updates of an epoch, or bad settings.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    from course_lib.training import pipeline, seeding  # late: import TensorFlow

    batch, n = int(settings["batch"]), len(split.y_train)
    if n % batch:
        raise ValueError(f"batch {batch} does not divide the {n} training images; choose a "
                         "training size that is a multiple of every batch")
    per_epoch, lr = n // batch, peak_lr(settings)
    if checks_per_epoch < 1 or per_epoch % checks_per_epoch:
        raise ValueError(f"checks_per_epoch {checks_per_epoch} must be >= 1 and divide the {per_epoch} "
                         f"updates of an epoch at batch {batch}")
    runner = runner or TrialRunner()
    name = str(settings["optimizer"])
    step = runner.reset(name, seed)
    runner.set_rate(lr, float(settings["base_lr"]), round(float(settings.get("warmup_epochs", 0)) * per_epoch))
    x, y = _images(split.x_train), np.asarray(split.y_train, np.int32)
    x_val = _images(split.x_val)
    curve: list[tuple[int, float]] = []
    losses: list[float] = []
    epoch_s: list[float] = []

    def check() -> None:
        accuracy = float(np.mean(np.argmax(runner.logits(x_val, eval_batch), axis=1) == split.y_val))
        curve.append((runner.updates(name), accuracy))

    started = time.perf_counter()
    for epoch in range(epochs):
        seeding.reseed_dropout(runner.model, seed, epoch)
        order = pipeline.epoch_indices(n, seed=seed, epoch=epoch)
        loss, seconds = runner.timed_epoch(step, x, y, order, batch, check, per_epoch // checks_per_epoch)
        losses.append(loss)
        epoch_s.append(seconds)
    train_s = time.perf_counter() - started
    test_loss = test_accuracy = None
    if test:
        test_loss, test_accuracy = _loss_and_accuracy(runner.logits(_images(split.x_test), eval_batch),
                                                      split.y_test)
    return Trial(seed=seed, epochs=epochs, updates=runner.updates(name), val_curve=tuple(curve),
                 val_accuracy=curve[-1][1], loss_curve=tuple(losses), epoch_s=tuple(epoch_s),
                 test_accuracy=test_accuracy, test_loss=test_loss, lr=lr, train_s=train_s)


def _images(images: np.ndarray) -> np.ndarray:
    """uint8 (N, 28, 28) images as the float32 (N, 28, 28, 1) in [0, 1] the model reads."""
    return (np.asarray(images)[..., None].astype(np.float32) / np.float32(255.0))


def _loss_and_accuracy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Mean sparse cross-entropy of ``logits`` (the course CNN outputs logits) and the accuracy of their argmax."""
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    return float(-log_p[rows, labels].mean()), float(np.mean(np.argmax(logits, axis=1) == labels))
