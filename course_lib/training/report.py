"""What a training script tells the learner and the launcher at its start and at its end.

Every course training script prints the same two reports, each as a readable line for people and a
JSON line for ``course_lib.runner.launch`` (docs/architecture.md): :func:`report_config` once the
epoch arithmetic (:class:`course_lib.training.epochs.EpochPlan`) is known, :func:`report_result`
after the final evaluation. Call them on rank 0 (the chief) only.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import time
from typing import Any

from course_lib.training.epochs import EpochPlan
from course_lib.training.events import emit

__all__ = ["report_config", "report_result"]


def report_config(*, plan: EpochPlan, script: str, strategy: str, epochs: int, first_epoch: int, lr: float,
                  json_lines: bool = False, headline: str | None = None, **fields: Any) -> None:
    """Print the epoch arithmetic and the run's settings, then the ``config`` event.

    Args:
        plan: The run's epoch (its numbers go into the event; a replica with one reader, else a worker).
        script: File name of the script (``"horovod_fmnist.py"``).
        strategy: ``"horovod"``, ``"mirrored"``, ``"multiworker"``, ``"horovod-elastic"``.
        epochs: Last epoch (1-based). first_epoch: First epoch this run trains (1-based).
        lr: Learning rate in use (after any scaling).
        json_lines: Also print the JSON ``config`` line.
        headline: The line printed after the arithmetic; default
            ``"{W} worker(s), optimizer {optimizer}, lr {lr}, epochs {first}..{last}"``.
        **fields: More ``config`` keys (``base_lr``, ``optimizer``, ``seed``, ...).
    """
    unit = "replica" if plan.one_reader else "worker"
    print(plan.describe(), flush=True)
    print(headline or f"{plan.workers} {unit}(s), optimizer {fields.get('optimizer', '?')}, lr {lr:g}, epochs "
          f"{first_epoch}..{epochs}", flush=True)
    emit("config", json_lines, script=script, strategy=strategy, workers=plan.workers,
         per_worker_batch=plan.per_worker_batch, global_batch=plan.global_batch, step_batch=plan.step_batch,
         train_size=plan.train_size, steps_per_epoch=plan.steps_per_epoch, samples_per_epoch=plan.samples_per_epoch,
         updates_per_epoch=plan.updates_per_epoch, epochs=epochs, first_epoch=first_epoch, lr=lr,
         backward_passes_per_step=plan.backward_passes_per_step, **fields)


def report_result(*, scores: tuple[float, float], plan: EpochPlan, strategy: str, epochs: int, epochs_run: int,
                  started: float, meter: Any = None, json_lines: bool = False, headline: str | None = None,
                  **fields: Any) -> dict[str, Any]:
    """Print the summary line and the ``result`` event, after the final evaluation.

    Args:
        scores: ``(test_loss, test_accuracy)`` of the final ``model.evaluate`` (every worker of a
            collective strategy evaluates; only the reporting one calls this).
        plan: The run's epoch (at its final size for an elastic run).
        strategy: As in the ``config`` event.
        epochs: Last epoch. epochs_run: Epochs this run trained (fewer after a resume).
        started: ``time.perf_counter()`` at the script's start.
        meter: The run's :class:`course_lib.training.callbacks.Throughput`; ``None``: a run without
            one (no images/s in the line or the event).
        json_lines: Also print the JSON ``result`` line.
        headline: The line to print instead of the default, with ``{acc}``, ``{loss}``, ``{wall}``
            (and ``{rate}``, ``{per_worker}``, ``{epochs_counted}`` when there is a meter) to fill in.
        **fields: More ``result`` keys (they replace the default ones of the same name).

    Returns:
        The ``result`` fields.
    """
    test_loss, test_acc = (float(v) for v in scores)
    wall = time.perf_counter() - started
    result: dict[str, Any] = dict(strategy=strategy, workers=plan.workers, per_worker_batch=plan.per_worker_batch,
                                  global_batch=plan.global_batch)
    values: dict[str, Any] = {"acc": test_acc, "loss": test_loss, "wall": wall}
    warmup_only = False
    if meter is not None:
        summary = meter.summary()
        summary_json = summary.to_dict()  # NaN -> None (strict JSON)
        result.update(images_per_sec=summary_json["images_per_sec_mean"], images_per_sec_ci95=summary_json["ci95"],
                      per_worker_images_per_sec=summary_json["per_worker_images_per_sec"])
        values.update(rate=summary.images_per_sec_mean, per_worker=summary.per_worker_images_per_sec,
                      epochs_counted=summary.epochs_counted)
        # Every epoch was warm-up (a one-epoch or resumed run): its rate is in the event, marked, but the line
        # does not report an epoch that its own epoch line called "not counted".
        warmup_only = summary.includes_warmup
        if warmup_only:
            result.update(warmup_only=True)
    if meter is None:
        default = "Test accuracy {acc:.4f}, loss {loss:.4f}; wall time {wall:.1f} s"
    elif warmup_only:
        default = ("Test accuracy {acc:.4f}, loss {loss:.4f}; no images/s (every epoch of this run was warm-up); "
                   "wall time {wall:.1f} s")
    else:
        default = ("Test accuracy {acc:.4f}, loss {loss:.4f}; {rate:.1f} images/s over {epochs_counted} epoch(s) "
                   f"({{per_worker:.1f}} per {'replica' if plan.one_reader else 'worker'}); wall time {{wall:.1f}} s")
    print((headline or default).format(**values), flush=True)
    result.update(epochs=epochs, epochs_run=epochs_run, total_steps=plan.steps_per_epoch * epochs_run,
                  test_loss=test_loss, test_accuracy=test_acc, wall_time_s=wall)
    result.update(fields)
    emit("result", json_lines, **result)
    return result
