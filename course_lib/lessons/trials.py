"""In-process training runs of the large-batch ladder: one (configuration, seed) per call.

Notebook 04 trains many short runs (every row with several seeds); starting a script per run would
cost more than the training. The runs here use the same course pieces as
``source_code/horovod_fmnist.py`` (model, data order, dropout reseeding, optimizers, warm-up in
updates) and REAL batches: a batch of 256 fits in memory, so nothing is emulated. Gradient
accumulation (``--backward-passes-per-step``) is the way to get the same update when it does not fit;
tests/test_accumulation.py proves the update is identical.

A configuration's ``settings`` (the ``flags`` of :class:`course_lib.lessons.ablation.Config`):
``optimizer``, ``base_lr`` (rate at ``base_batch``), ``base_batch``, ``batch`` (global batch of
every update), ``lr_scaling`` (``"none"``, ``"linear"`` = × batch/base_batch, ``"sqrt"`` =
× sqrt of it) and ``warmup_epochs`` (linear ramp from ``base_lr`` to the scaled rate, 0 = none).

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Mapping, NamedTuple

import numpy as np

from course_lib.training import data

__all__ = ["Split", "carve_validation", "peak_lr", "train_trial"]


class Split(NamedTuple):
    """Training, validation (carved from the training set) and test arrays."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def carve_validation(train_size: int, val_size: int) -> Split:
    """First ``train_size`` training images for training, the next ``val_size`` for validation,
    and the full 10 000-image test set (used only for the final report, never for tuning).

    Args:
        train_size: Training images, >= 1.
        val_size: Validation images, >= 1; ``train_size + val_size`` <= 60 000.

    Returns:
        A :class:`Split`; the validation images are disjoint from the training images.

    Raises:
        ValueError: Sizes out of range.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if train_size < 1 or val_size < 1 or train_size + val_size > 60_000:
        raise ValueError(f"need train_size, val_size >= 1 and their sum <= 60000; got "
                         f"{train_size} + {val_size}")
    arrays = data.load_arrays(train_subset=train_size + val_size)
    return Split(arrays.x_train[:train_size], arrays.y_train[:train_size],
                 arrays.x_train[train_size:], arrays.y_train[train_size:],
                 arrays.x_test, arrays.y_test)


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
                eval_batch: int = 1000, test: bool = True, checks_per_epoch: int = 1) -> dict[str, Any]:
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

    Returns:
        ``{"seed", "epochs", "updates", "val_curve": [(updates, val_accuracy) per check], "val_accuracy",
        "loss_curve": [training loss per epoch], "epoch_s": [training seconds per epoch, validation
        excluded; the first includes tracing], "test_accuracy", "test_loss", "lr", "train_s"}``
        (the test values are ``None`` when ``test`` is False; both come from the logits of ``predict``,
        the loss as the mean cross-entropy).

    Raises:
        ValueError: ``batch`` does not divide the training images (every update must see a full
            batch), ``checks_per_epoch`` does not divide the updates of an epoch, or bad settings.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    # late: callbacks and optimizers import TensorFlow
    from course_lib.training import callbacks, models, optimizers, pipeline, schedules, seeding

    batch, n = int(settings["batch"]), len(split.y_train)
    if n % batch:
        raise ValueError(f"batch {batch} does not divide the {n} training images; choose a "
                         "training size that is a multiple of every batch")
    per_epoch, lr = n // batch, peak_lr(settings)
    if checks_per_epoch < 1 or per_epoch % checks_per_epoch:
        raise ValueError(f"checks_per_epoch {checks_per_epoch} must be >= 1 and divide the {per_epoch} "
                         f"updates of an epoch at batch {batch}")
    every = per_epoch // checks_per_epoch
    warmup = round(float(settings.get("warmup_epochs", 0)) * per_epoch)
    rate = (schedules.linear_warmup(lr, warmup, lr / float(settings["base_lr"])) if warmup
            else lr)
    keras.backend.clear_session()
    seeding.configure(seed, deterministic=True)
    model = models.build_model(seed=seed)
    models.compile_model(model, optimizers.get_optimizer(settings["optimizer"], rate))
    val = pipeline.make_dataset(split.x_val, split.y_val, batch_size=eval_batch, training=False)
    curve: list[tuple[int, float]] = []
    losses: list[float] = []
    epoch_s: list[float] = []

    class Validate(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.started = time.perf_counter()
            self.paused = 0.0   # seconds spent validating inside this epoch (not training)

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if (batch + 1) % every == 0 and batch + 1 < per_epoch:
                started = time.perf_counter()
                self.check()
                self.paused += time.perf_counter() - started

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            # training only: the checks inside the epoch and the one below are excluded
            epoch_s.append(time.perf_counter() - self.started - self.paused)
            losses.append(float((logs or {}).get("loss", math.nan)))
            self.check()

        def check(self) -> None:
            # predict, not evaluate: evaluate would reset the training loss that fit is averaging
            logits = self.model.predict(val, verbose=0)
            accuracy = float(np.mean(np.argmax(logits, axis=1) == split.y_val))
            curve.append((int(self.model.optimizer.iterations.numpy()), accuracy))

    train = pipeline.make_epochs_dataset(split.x_train, split.y_train, batch_size=batch, seed=seed,
                                         num_workers=1, worker_index=0, first_epoch=0,
                                         last_epoch=epochs)
    # TensorFlow's logger warns when a callback's batch-end time exceeds the batch time (a validation
    # check does, by design) and when a model's functions are traced again (every run builds a new
    # model): how often follows the machine's timing, so it is quiet here (errors still show).
    tf_logger = logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)
    try:
        started = time.perf_counter()
        model.fit(train, epochs=epochs, steps_per_epoch=per_epoch, verbose=0,
                  callbacks=[callbacks.ReseedDropout(seed), Validate()])
        train_s = time.perf_counter() - started
        test_loss = test_accuracy = None
        if test:
            # predict, like the checks: its function is traced already (evaluate would trace its own,
            # which cost about as much as the 10 000 images); same batches, same logits, same accuracy
            test_set = pipeline.make_dataset(split.x_test, split.y_test, batch_size=eval_batch,
                                             training=False)
            test_loss, test_accuracy = _loss_and_accuracy(model.predict(test_set, verbose=0), split.y_test)
    finally:
        tf_logger.setLevel(level)
    return {"seed": seed, "epochs": epochs, "updates": int(model.optimizer.iterations.numpy()), "val_curve": curve,
            "val_accuracy": curve[-1][1], "loss_curve": losses, "epoch_s": epoch_s,
            "test_accuracy": test_accuracy,
            "test_loss": test_loss, "lr": lr, "train_s": train_s}


def _loss_and_accuracy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Mean sparse cross-entropy of ``logits`` (the course CNN outputs logits) and the accuracy of their argmax."""
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    return float(-log_p[rows, labels].mean()), float(np.mean(np.argmax(logits, axis=1) == labels))
