"""Notebook 02's scaling runs: MirroredStrategy configurations trained in interleaved rounds, compared in pairs.

The pairing itself (the mean of per-round ratios, its interval and verdict) is
:mod:`course_lib.lessons.common.paired_runs`'s; this module runs 02's in-process configurations and writes what
their verdicts allow.

:func:`train_in_rounds` gives each configuration (a device list and a per-replica batch) its own strategy and
model (the same seed) and trains one epoch of each in turn, round after round, in the order of
:func:`course_lib.lessons.common.paired_runs.round_order` (A B C, C B A, …), so that a slowdown of the machine
falls on all of them alike. Round 0 traces the graphs and is not counted. Every record keeps the images/s of each counted
round (``extra["round_rates"]``), so :func:`scaling_pair` compares two configurations round by round: the
speed-up is the mean of the per-round ratios and its interval the paired one, the interval the verdict uses and
the table and the figure show. :func:`reading` and :func:`summary` write what the verdicts allow, and nothing
more (tests/test_mirrored_rounds.py flips each verdict).

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from course_lib.lessons.common.measured import MEASURED_HERE, approx, at_least, in_words
from course_lib.lessons.common.paired_runs import paired_ratio, round_order
from course_lib.lessons.common.scaling import RunRecord, scaling_table, to_record
from course_lib.training.stats import mean_ci95

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = ["train_in_rounds", "scaling_pair", "speedup_verdict", "verdict_lines", "reading", "summary"]


def train_in_rounds(configs: Mapping[str, tuple[Sequence[str], int]], images: np.ndarray, labels: np.ndarray, *,
                    rounds: int, seed: int = 0) -> dict[str, RunRecord]:
    """Train every configuration one epoch per round, in turn, and time each epoch.

    An epoch is timed by the course's ``Throughput`` callback (steps × global batch) from the end of its first
    step, which starts the epoch's input pipeline. The data order is the seeded one of
    ``pipeline.distribute_for_strategy``; every image id a model consumes is recorded.

    Args:
        configs: ``{name: (device names, per-replica batch)}``, e.g. ``{"A": (["/cpu:0"], 64), ...}``.
        images: Training images (N, 28, 28) uint8.
        labels: Their labels.
        rounds: Rounds, >= 2 (round 0 is not counted); an odd number balances the counted rounds' order.
        seed: Weights and data order.

    Returns:
        ``{name: RunRecord}`` with ``images_per_sec`` the mean of the counted rounds and, in ``extra``:
        ``round_rates``, ``images_per_sec_ci95``, ``samples_per_epoch``, ``steps``, ``consumed``.

    Raises:
        ValueError: ``rounds < 2`` or no configuration.
    """
    if rounds < 2 or not configs:
        raise ValueError(f"need rounds >= 2 (round 0 traces the graphs) and a configuration, got {rounds}, {configs}")
    import tensorflow as tf  # late: TensorFlow starts only when the runs do

    from course_lib.training import consumption, models, pipeline  # late: models and pipeline import TensorFlow
    from course_lib.training.callbacks import Throughput  # late: callbacks imports TensorFlow
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    keras.backend.clear_session()
    runs: dict[str, dict[str, Any]] = {}
    for name, (devices, per_replica) in configs.items():
        strategy = tf.distribute.MirroredStrategy(list(devices))
        with strategy.scope():
            model = models.compile_model(models.build_model(seed=seed), "adam")
        runs[name] = {"strategy": strategy, "model": model, "per_replica": per_replica, "rates": [],
                      "samples": [], "consumed": consumption.ConsumedIds()}
    for epoch in range(rounds):
        for name in round_order(list(runs), epoch):
            run = runs[name]
            strategy = run["strategy"]
            dist, global_batch, steps = pipeline.distribute_for_strategy(
                strategy, images, labels, batch_size_per_replica=run["per_replica"], training=True,
                first_epoch=epoch, epochs=epoch + 1, seed=seed, recorder=run["consumed"])
            meter = Throughput(global_batch, samples_per_epoch=len(images), workers=strategy.num_replicas_in_sync,
                               warmup_epochs=0, warmup_steps=1, verbose=False)
            run["model"].fit(dist, initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=steps, callbacks=[meter],
                             verbose=0)
            run.update(global_batch=global_batch, steps=steps)
            run["rates"].append(meter.summary().images_per_sec_mean)
            run["samples"].append(meter.epochs[-1].samples)
    records = {}
    for name, run in runs.items():
        rates = run["rates"][1:]
        mean, ci95 = mean_ci95(rates)
        replicas = run["strategy"].num_replicas_in_sync
        print(f"{name}: {replicas} replica(s), global batch {run['global_batch']}, {run['steps']} steps and "
              f"{run['samples'][-1]} images per epoch, {mean:.1f} images/s (± {ci95:.1f} over {len(rates)} rounds)")
        records[name] = RunRecord(devices=replicas, per_device_batch=run["per_replica"],
                                  global_batch=run["global_batch"], images_per_sec=mean, strategy="mirrored",
                                  label=name, extra={"round_rates": rates, "images_per_sec_ci95": ci95,
                                                     "samples_per_epoch": run["samples"], "steps": run["steps"],
                                                     "consumed": run["consumed"]})
    return records


def scaling_pair(baseline: Any, scaled: Any, *, mode: str) -> "pandas.DataFrame":
    """``scaling.scaling_table`` of two runs measured in the same rounds, with the paired intervals.

    Each record carries the images/s of every counted round in ``extra["round_rates"]`` (round i of one run
    beside round i of the other). The speed-up is the mean of the round-by-round ratios ``T_N / T_1`` and its
    half-width the t-interval of those ratios: what slowed the machine during a round slowed both runs and
    cancels. The efficiency and its half-width are the speed-up's divided by N. ``images_per_sec`` is each run's
    mean and ``images_per_sec_ci95`` its own, unpaired, interval. ``attrs["paired"]`` is True
    (``scaling.plot_scaling`` says so in its legend).

    Args:
        baseline: The 1-device run (anything ``scaling.to_record`` accepts).
        scaled: The N-device run.
        mode: ``"weak"`` or ``"strong"``, checked as ``scaling_table`` checks it.

    Returns:
        Two rows with ``scaling_table``'s columns, plus ``speedup_ci95`` and ``rounds``.

    Raises:
        ValueError: A baseline with more than 1 device, a record without positive ``round_rates``, rounds of
            different lengths, or what ``scaling_table`` refuses.
        scaling.MixedScalingError: As ``scaling_table``.
    """
    base, run = to_record(baseline), to_record(scaled)
    if base.devices != 1:
        raise ValueError(f"the baseline of a paired table must have 1 device, got {base.devices}")
    rates = []
    for record in (base, run):
        values = [float(v) for v in record.extra.get("round_rates") or []]
        if not values or any(not math.isfinite(v) or v <= 0 for v in values):
            raise ValueError(f"the {record.devices}-device run needs extra['round_rates'], its positive images/s "
                             f"round by round; got {record.extra.get('round_rates')!r}")
        rates.append(values)
    if len(rates[0]) != len(rates[1]):
        raise ValueError(f"paired runs need the same rounds: {len(rates[0])} against {len(rates[1])}")
    own = [mean_ci95(values) for values in rates]
    table = scaling_table([replace(r, images_per_sec=m, extra={**r.extra, "images_per_sec_ci95": ci})
                           for r, (m, ci) in zip((base, run), own)], mode=mode)
    speedup = paired_ratio([(rates[1], rates[0])])   # round i of the N-device run over round i of the 1-device run
    table["speedup"] = [1.0, speedup.mean]
    table["efficiency"] = [1.0, speedup.mean / run.devices]
    table["efficiency_ci95"] = [0.0, speedup.ci95 / run.devices]
    table["speedup_ci95"] = [0.0, speedup.ci95]
    table["rounds"] = len(rates[0])
    table.attrs["paired"] = True
    return table


def _row(table: "pandas.DataFrame") -> Any:
    return table.iloc[-1]


def speedup_verdict(table: "pandas.DataFrame") -> str:
    """``"True"``, ``"False"`` or ``"cannot tell"``: is the N-device run of a paired table faster (speed-up ≥ 1)?"""
    row = _row(table)
    return at_least(float(row["speedup"]), float(row["speedup_ci95"]), 1.0)


def _measured(table: "pandas.DataFrame") -> str:
    row = _row(table)
    return f"speed-up {approx(float(row['speedup']))} ± {float(row['speedup_ci95']):.2f}, {int(row['rounds'])} paired rounds"


def verdict_lines(weak: "pandas.DataFrame", strong: "pandas.DataFrame") -> list[str]:
    """The two verdict lines under the tables (``measured:`` marks a measured statement)."""
    w, s = _row(weak), _row(strong)
    return [f"measured: {int(w['devices'])} replicas process more images/s than 1 replica at per-replica batch "
            f"{int(w['per_device_batch'])} (weak speed-up ≥ 1): {speedup_verdict(weak)} ({_measured(weak)}, "
            f"efficiency {approx(float(w['efficiency']))} ± {float(w['efficiency_ci95']):.2f})",
            f"measured: {int(s['devices'])} replicas beat one device with the same global batch "
            f"{int(s['global_batch'])} (strong speed-up ≥ 1): {speedup_verdict(strong)} ({_measured(strong)})"]


def reading(weak: "pandas.DataFrame", strong: "pandas.DataFrame") -> str:
    """What the two verdicts mean, in the words they allow (Markdown)."""
    n, batch = int(_row(strong)["devices"]), int(_row(strong)["global_batch"])
    replicas = f"{n} simulated replicas"
    first = in_words(
        speedup_verdict(strong),
        f"**{replicas} processed more images per second than one device with the same global batch** "
        f"({_measured(strong)}): splitting the step paid off even on shared cores, as it can when one "
        "device alone does not keep every core busy.",
        f"**{replicas} processed fewer images per second than one device with the same global batch** "
        f"({_measured(strong)}): on cores they share, splitting each step and all-reducing the gradients "
        "cost more than it gained.",
        f"**This run cannot tell {replicas} from one device with the same global batch of {batch}** "
        f"({_measured(strong)}): the cost or gain of splitting the step is inside the noise.")
    per = int(_row(weak)["per_device_batch"])
    second = in_words(
        speedup_verdict(weak),
        f"Against one replica at batch {per} (weak scaling) they processed more images per second "
        f"({_measured(weak)}); run B shows how much of that the larger global batch gives alone.",
        f"Against one replica at batch {per} (weak scaling) they processed fewer images per second "
        f"({_measured(weak)}).",
        f"Against one replica at batch {per} (weak scaling) this run cannot tell ({_measured(weak)}).")
    return f"{MEASURED_HERE} {first} {second}"


def summary(strong: "pandas.DataFrame") -> str:
    """The summary's bullet about the strong-scaling pair (Markdown), as its verdict decided."""
    said = in_words(speedup_verdict(strong), "faster than", "slower than", "not told apart from")
    return (f"- {MEASURED_HERE} {int(_row(strong)['devices'])} simulated replicas were {said} one device with the same "
            f"global batch ({_measured(strong)}). Simulated devices share this machine's cores, so this is the cost "
            "or gain of splitting a step, not what GPUs, each with its own compute, would show.")
