"""Tests of course_lib.training.callbacks: exact throughput arithmetic with a fake clock."""

from __future__ import annotations

import io
import json
import math

import pytest

from course_lib.training import stats
from course_lib.training.throughput import ThroughputMeter


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_epoch(cb, clock, epoch, step_times, logs=None):
    cb.on_epoch_begin(epoch, {})
    for step, dt in enumerate(step_times):
        clock.now += dt
        cb.on_train_batch_end(step, {})
    logs = dict(logs or {"loss": 0.5, "accuracy": 0.8})
    cb.on_epoch_end(epoch, logs)
    return logs


def meter(clock, global_batch, **kw):
    kw.setdefault("verbose", False)
    m = ThroughputMeter(global_batch, clock=clock, **kw)
    m.on_train_begin()
    return m


def test_partial_last_batch_is_capped():
    clock = FakeClock()
    m = meter(clock, 100, samples_per_epoch=950, warmup_epochs=0)
    logs = run_epoch(m, clock, 0, [0.5] * 10)
    assert logs["images_per_sec"] == pytest.approx(950 / 5.0, rel=1e-12)
    assert logs["step_time_ms"] == pytest.approx(500.0, rel=1e-12)
    assert m.summary().samples_total == 950


def test_floored_steps_trap_gives_true_efficiency():
    """The reference divided the dataset size by the epoch time although fewer samples ran."""
    n = 60_000
    clock = FakeClock()
    one = meter(clock, 128, warmup_epochs=0)
    run_epoch(one, clock, 0, [0.02] * (n // 128))  # 468 steps = 59 904 samples
    four = meter(clock, 512, warmup_epochs=0, workers=4)
    steps4 = 50_000 // 512  # floored steps_per_epoch: 98 steps = 50 176 samples
    step4 = 512 / 19_456
    run_epoch(four, clock, 0, [step4] * steps4)

    t1, t4 = one.summary().images_per_sec_mean, four.summary().images_per_sec_mean
    assert t1 == pytest.approx(59_904 / (468 * 0.02), rel=1e-12)
    assert t4 == pytest.approx(steps4 * 512 / (steps4 * step4), rel=1e-9)  # float sums of 98 steps
    assert t4 / (4 * t1) == pytest.approx(0.76, rel=1e-9)
    assert four.summary().per_worker_images_per_sec == pytest.approx(t4 / 4, rel=1e-12)
    # what the reference printed: dataset length / epoch time
    naive1 = n / (468 * 0.02)
    naive4 = n / (steps4 * step4)
    assert naive4 / (4 * naive1) > 0.90


def test_warmup_epochs_excluded_and_ci95():
    clock = FakeClock()
    m = meter(clock, 10, warmup_epochs=1)
    run_epoch(m, clock, 0, [1.0] * 10)  # slow first epoch (tracing)
    run_epoch(m, clock, 1, [0.1] * 10)  # 100 images / 1 s
    run_epoch(m, clock, 2, [0.2] * 10)  # 100 images / 2 s
    s = m.summary()
    assert s.epochs_counted == 2 and not s.includes_warmup
    assert s.per_epoch == pytest.approx([100.0, 50.0], rel=1e-12)
    assert s.images_per_sec_mean == pytest.approx(75.0, rel=1e-12)
    # sample std of (100, 50) = 25*sqrt(2); / sqrt(2) = 25; t(0.975, df=1) = 12.706
    assert s.ci95 == pytest.approx(12.706 * 25.0, rel=1e-9)
    assert s.step_time_ms_mean == pytest.approx(1000 * 3.0 / 20, rel=1e-12)
    assert s.samples_total == 200


def test_warmup_steps_excluded_within_epoch():
    clock = FakeClock()
    m = meter(clock, 32, warmup_epochs=0, warmup_steps=2)
    logs = run_epoch(m, clock, 0, [1.0, 1.0] + [0.1] * 8)
    assert logs["images_per_sec"] == pytest.approx(8 * 32 / 0.8, rel=1e-12)
    assert logs["step_time_ms"] == pytest.approx(100.0, rel=1e-12)


def test_only_warmup_epochs_are_reported_flagged():
    clock = FakeClock()
    m = meter(clock, 10, warmup_epochs=1)
    run_epoch(m, clock, 0, [0.1] * 10)
    s = m.summary()
    assert s.includes_warmup and s.epochs_counted == 1
    assert math.isnan(s.ci95) and s.to_dict()["ci95"] is None


def test_rank0_prints_json_lines_others_silent():
    clock = FakeClock()
    out0, out1 = io.StringIO(), io.StringIO()
    m0 = meter(clock, 20, warmup_epochs=0, json_lines=True, verbose=True, stream=out0, workers=2)
    m1 = meter(clock, 20, warmup_epochs=0, json_lines=True, verbose=True, stream=out1, rank=1,
               workers=2)
    for m in (m0, m1):
        run_epoch(m, clock, 4, [0.5] * 4, logs={"loss": 0.25, "accuracy": 0.5, "lr": 0.1})
    assert out1.getvalue() == ""
    lines = out0.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("epoch 5:")
    event = json.loads(lines[1])
    assert event["event"] == "epoch" and event["epoch"] == 5
    assert event["steps"] == 4 and event["samples"] == 80
    assert event["epoch_time_s"] == pytest.approx(2.0)
    assert event["images_per_sec"] == pytest.approx(40.0)
    assert event["per_worker_images_per_sec"] == pytest.approx(20.0)
    assert event["loss"] == 0.25 and event["accuracy"] == 0.5 and event["lr"] == 0.1


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="samples_per_epoch"):
        ThroughputMeter(64, samples_per_epoch=0)
    with pytest.raises(ValueError, match="global_batch_size"):
        ThroughputMeter(0)


def test_t_table():
    assert stats.t_critical_95(1) == 12.706
    assert stats.t_critical_95(30) == 2.042
    assert stats.t_critical_95(1000) == 1.960
    with pytest.raises(ValueError):
        stats.t_critical_95(0)


def test_keras_fit_with_throughput(small_fmnist):
    import tensorflow as tf

    from course_lib.training import callbacks, models, pipeline

    throughput = callbacks.Throughput(64, samples_per_epoch=500, verbose=False)
    assert isinstance(throughput, tf.keras.callbacks.Callback)
    model = models.compile_model(models.build_model(seed=0), tf.keras.optimizers.SGD(0.05))
    ds = pipeline.make_epochs_dataset(small_fmnist.x_train[:500], small_fmnist.y_train[:500],
                                  batch_size=64, seed=0, num_workers=1, worker_index=0,
                                  first_epoch=0, last_epoch=2)
    history = model.fit(ds, epochs=2, steps_per_epoch=pipeline.steps_per_epoch(500, 64), verbose=0,
                        callbacks=[throughput])
    assert len(history.history["images_per_sec"]) == 2
    assert all(v > 0 for v in history.history["step_time_ms"])
    summary = throughput.summary()
    assert summary.epochs_counted == 1 and summary.samples_total == 500
    assert [e.steps for e in throughput.epochs] == [8, 8]
