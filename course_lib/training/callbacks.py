"""Keras callbacks of the course: honest throughput, and the per-epoch chores of the scripts.

This module imports TensorFlow (importing TensorFlow does not initialise any device, so
``course_lib.training.devices.simulate_devices`` still works after it: tests/test_devices.py).

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import time
from typing import Any

from course_lib.training.keras2 import keras

from course_lib.training.checkpoints import save_checkpoint
from course_lib.training.consumption import ConsumedIds
from course_lib.training.events import emit
from course_lib.training.models import weights_digest
from course_lib.training.seeding import reseed_dropout
from course_lib.training.throughput import ThroughputMeter

__all__ = ["Throughput", "ReseedDropout", "EvaluateEachEpoch", "CheckpointEachEpoch",
           "ReportConsumed", "StepDigests", "FirstStepLearningRate"]


class Throughput(ThroughputMeter, keras.callbacks.Callback):
    """Keras callback measuring images actually processed per second.

    Same constructor, hooks and summary as :class:`course_lib.training.throughput.ThroughputMeter`,
    whose arithmetic it runs at every batch and epoch end.
    """


class ReseedDropout(keras.callbacks.Callback):
    """At each epoch start, reset dropout's random generators from ``(seed, epoch)``.

    So a resumed run draws the masks of an uninterrupted one
    (:func:`course_lib.training.seeding.reseed_dropout`).
    """

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        reseed_dropout(self.model, self.seed, epoch)


class EvaluateEachEpoch(keras.callbacks.Callback):
    """After every epoch, evaluate on a test set and add ``test_loss``, ``test_accuracy`` and
    ``wall_time_s`` (seconds since ``started``) to the epoch's logs (``--eval-every-epoch``).

    Put it after ``MetricAverageCallback``, on rank 0 only: the keys it adds are rank 0's.
    """

    def __init__(self, test_data: Any, started: float) -> None:
        super().__init__()
        self.test_data, self.started = test_data, started

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        test_loss, test_acc = self.model.evaluate(self.test_data, verbose=0)
        if logs is not None:
            logs.update(test_loss=float(test_loss), test_accuracy=float(test_acc),
                        wall_time_s=time.perf_counter() - self.started)


class CheckpointEachEpoch(keras.callbacks.Callback):
    """After every epoch, save model and optimizer atomically and print the ``checkpoint`` event.

    Use it on rank 0 only (:func:`course_lib.training.checkpoints.save_checkpoint`).
    """

    def __init__(self, directory: str, optimizer: Any, *, json_lines: bool = False,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.directory, self.optimizer_to_save = directory, optimizer
        self.json_lines, self.extra = json_lines, dict(extra or {})

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        info = save_checkpoint(self.directory, model=self.model, optimizer=self.optimizer_to_save,
                               epoch=epoch + 1, digest=weights_digest(self.model),
                               extra=self.extra)
        emit("checkpoint", self.json_lines, epoch=epoch + 1, path=info["path"],
             digest=info["digest"])


class ReportConsumed(keras.callbacks.Callback):
    """After every epoch, print this rank's ``consumed`` event: which examples it trained on.

    Every rank uses it (like the ``digest`` event); ``recorder`` is the
    :class:`course_lib.training.consumption.ConsumedIds` given to the input pipeline, so the
    numbers come from the batches the model actually pulled.
    """

    def __init__(self, recorder: ConsumedIds, rank: int, *, json_lines: bool = False, run: str | None = None) -> None:
        super().__init__()
        self.recorder, self.rank, self.json_lines, self.run = recorder, rank, json_lines, run

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        fields: dict[str, Any] = self.recorder.event(epoch, self.rank)
        if self.run is not None:  # one process training several models in turn names each
            fields["run"] = self.run
        emit("consumed", self.json_lines, **fields)


class StepDigests(keras.callbacks.Callback):
    """Print a ``step_digest`` event with the weights digest before training and after every
    (micro-)step: under gradient accumulation the weights must change only every k-th step.

    A check, not for timing runs (hashing the weights every step costs time).
    """

    def __init__(self, *, json_lines: bool = False) -> None:
        super().__init__()
        self.json_lines, self.epoch, self.step = json_lines, 0, 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        emit("step_digest", self.json_lines, epoch=0, step=0, digest=weights_digest(self.model))

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch + 1

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.step += 1
        emit("step_digest", self.json_lines, epoch=self.epoch, step=self.step,
             digest=weights_digest(self.model))


class FirstStepLearningRate(keras.callbacks.Callback):
    """Add ``lr_first_step``, the learning rate the epoch's first step trained with, to the epoch's logs.

    Put it after the learning-rate schedule callbacks (they set the rate at each step's start) and before
    :class:`Throughput`, which copies the logs into the ``epoch`` event: a warm-up's start is then on
    record (tests/test_scripts.py checks it at 2 ranks).

    Introduced in notebooks/03_horovod.ipynb.
    """

    def __init__(self) -> None:
        super().__init__()
        self.value: float | None = None

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        if batch == 0:
            self.value = float(keras.backend.get_value(self.model.optimizer.learning_rate))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None and self.value is not None:
            logs["lr_first_step"] = self.value
