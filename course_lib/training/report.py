"""What a training script tells the learner and the launcher at its start and at its end.

Both course scripts print the same two reports, each as a readable line for people and a JSON
line for ``course_lib.runner.launch`` (docs/architecture.md): :func:`report_config` once the
epoch arithmetic is known, :func:`report_result` after the final evaluation. Call them on rank 0
only.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import time
from typing import Any

from course_lib.training.epochs import describe_epoch
from course_lib.training.events import emit

__all__ = ["report_config", "report_result"]


def report_config(*, script: str, strategy: str, arith: dict[str, int], train_size: int,
                  per_worker_batch: int, workers: int, epochs: int, first_epoch: int, lr: float,
                  backward_passes_per_step: int = 1, json_lines: bool = False,
                  unit: str = "worker", **fields: Any) -> None:
    """Print the epoch arithmetic and the run's settings, then the ``config`` event.

    Args:
        script: File name of the script (``"horovod_fmnist.py"``).
        strategy: ``"horovod"`` or ``"mirrored"``.
        arith: :func:`course_lib.training.epochs.epoch_arithmetic` of this run.
        train_size, per_worker_batch, workers, backward_passes_per_step: As passed to it.
        epochs: Last epoch (1-based). first_epoch: First epoch this run trains (1-based).
        lr: Learning rate in use (after any scaling).
        json_lines: Also print the JSON ``config`` line.
        unit: What a worker is called in the text (``"worker"`` or ``"replica"``).
        **fields: More ``config`` keys (``base_lr``, ``optimizer``, ``seed``, ...).
    """
    print(describe_epoch(arith, train_size, per_worker_batch, workers, backward_passes_per_step,
                         unit=unit), flush=True)
    print(f"{workers} {unit}(s), optimizer {fields.get('optimizer', '?')}, lr {lr:g}, epochs "
          f"{first_epoch}..{epochs}", flush=True)
    emit("config", json_lines, script=script, strategy=strategy, workers=workers,
         per_worker_batch=per_worker_batch, global_batch=arith["global_batch"],
         step_batch=arith["step_batch"], train_size=train_size,
         steps_per_epoch=arith["steps_per_epoch"], samples_per_epoch=arith["samples_per_epoch"],
         updates_per_epoch=arith["updates_per_epoch"], epochs=epochs, first_epoch=first_epoch,
         lr=lr, backward_passes_per_step=backward_passes_per_step, **fields)


def report_result(*, model: Any, test_data: Any, meter: Any, strategy: str, workers: int,
                  per_worker_batch: int, global_batch: int, epochs: int, epochs_run: int,
                  steps_per_epoch: int, started: float, json_lines: bool = False) -> dict[str, Any]:
    """Evaluate on the test set, print the summary line and the ``result`` event.

    Args:
        model: The trained Keras model. test_data: The test dataset (or distributed dataset).
        meter: The run's :class:`course_lib.training.callbacks.Throughput`.
        strategy, workers, per_worker_batch, global_batch: As in the ``config`` event.
        epochs: Last epoch. epochs_run: Epochs this run trained (fewer after a resume).
        steps_per_epoch: Training steps per epoch.
        started: ``time.perf_counter()`` at the script's start.
        json_lines: Also print the JSON ``result`` line.

    Returns:
        The ``result`` fields.
    """
    test_loss, test_acc = model.evaluate(test_data, verbose=0)
    summary = meter.summary()
    summary_json = summary.to_dict()  # NaN -> None (strict JSON)
    wall = time.perf_counter() - started
    print(f"Test accuracy {test_acc:.4f}, loss {test_loss:.4f}; "
          f"{summary.images_per_sec_mean:.1f} images/s over {summary.epochs_counted} epoch(s) "
          f"({summary.per_worker_images_per_sec:.1f} per {'worker' if strategy == 'horovod' else 'replica'}); "
          f"wall time {wall:.1f} s", flush=True)
    result = dict(strategy=strategy, workers=workers, per_worker_batch=per_worker_batch,
                  global_batch=global_batch, images_per_sec=summary_json["images_per_sec_mean"],
                  images_per_sec_ci95=summary_json["ci95"],
                  per_worker_images_per_sec=summary_json["per_worker_images_per_sec"],
                  epochs=epochs, epochs_run=epochs_run, total_steps=steps_per_epoch * epochs_run,
                  test_loss=float(test_loss), test_accuracy=float(test_acc), wall_time_s=wall)
    emit("result", json_lines, **result)
    return result
