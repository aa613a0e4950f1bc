"""Tests of course_lib.training.callbacks: exact throughput arithmetic with a fake clock."""

from __future__ import annotations

import io
import json
import math
import time

import pytest

from course_lib.training import stats
from course_lib.training.throughput import ThroughputMeter, below_peak_cpu


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_epoch(cb, clock, epoch, step_times, logs=None, machine=None):
    cb.on_epoch_begin(epoch, {})
    if machine is not None:  # (FakeMachine, cores busy during the epoch)
        machine[0].epoch(machine[1], sum(step_times))
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


def test_keep_across_fits_counts_one_epoch_per_fit_and_names_the_run():
    """Several models in one process: one fit per epoch, in turn with another model, one meter for all of them."""
    clock = FakeClock()
    out = io.StringIO()
    kept = meter(clock, 10, warmup_epochs=1, keep_across_fits=True, label="second", json_lines=True,
                 verbose=True, stream=out)
    anew = meter(clock, 10, warmup_epochs=1)
    for epoch, step in enumerate([1.0, 0.1, 0.2]):   # each epoch its own fit: on_train_begin every time
        for m in (kept, anew):
            m.on_train_begin()
            run_epoch(m, clock, epoch, [step] * 10)
    s = kept.summary()
    assert s.epochs_counted == 2 and not s.includes_warmup
    assert s.per_epoch == pytest.approx([100.0, 50.0], rel=1e-12)
    assert anew.summary().epochs_counted == 1 and anew.summary().includes_warmup   # the control: each fit anew
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("epoch 1 (second): ") and lines[0].endswith("(warm-up, not counted)")
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert [(e["epoch"], e["run"], e["warmup"]) for e in events] == [(1, "second", True), (2, "second", False),
                                                                      (3, "second", False)]


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="samples_per_epoch"):
        ThroughputMeter(64, samples_per_epoch=0)
    with pytest.raises(ValueError, match="step_batch"):
        ThroughputMeter(0)


class FakeMachine:
    """CPU seconds and /proc/stat jiffies that a test moves along with the fake clock."""

    def __init__(self, clock):
        self.clock, self.cpu, self.total, self.idle = clock, 0.0, 0, 0

    def cpu_clock(self):
        from course_lib.training.cpuclock import CpuClock, ProcStat

        return CpuClock(expected_cpus=2, clock=self.clock, cpu_time=lambda: self.cpu,
                        stat_reader=lambda: ProcStat(self.total, self.idle, 0, 2))

    def epoch(self, cores_busy, seconds):
        self.cpu += cores_busy * seconds
        self.total += int(200 * seconds)
        self.idle += int(100 * (2 - cores_busy) * seconds)


def test_disturbed_epoch_is_flagged_and_left_out_of_the_mean():
    clock = FakeClock()
    machine = FakeMachine(clock)
    out = io.StringIO()
    m = meter(clock, 10, warmup_epochs=0, json_lines=True, stream=out,
              cpu_clock=machine.cpu_clock, measure_cpu=True, exclude_disturbed=True)
    kept = meter(clock, 10, warmup_epochs=0, cpu_clock=machine.cpu_clock, measure_cpu=True)
    for epoch, (busy, step) in enumerate([(1.9, 0.1), (1.0, 0.2), (1.9, 0.1)]):
        for each in (m, kept):
            run_epoch(each, clock, epoch, [step] * 10, machine=(machine, busy))  # 2: one core
    s = m.summary()
    k = kept.summary()  # default: flagged, but the mean and the epoch count stay as they were
    assert k.disturbed_epochs == [2] and k.excluded_epochs == 0 and k.epochs_counted == 3
    assert k.images_per_sec_mean == pytest.approx(250 / 3)
    assert s.per_epoch == pytest.approx([100.0, 50.0, 100.0])
    assert s.cpu_per_wall == pytest.approx([1.9, 1.0, 1.9])
    assert s.disturbed_epochs == [2] and s.excluded_epochs == 1 and s.epochs_counted == 2
    assert s.images_per_sec_mean == pytest.approx(100.0) and s.samples_total == 200
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["disturbed"] for e in events] == [False, True, False]
    assert events[1]["cpu_per_wall"] == pytest.approx(1.0)


def test_all_epochs_disturbed_keeps_them_all_and_says_so():
    clock = FakeClock()
    machine = FakeMachine(clock)
    m = meter(clock, 10, warmup_epochs=0, cpu_clock=machine.cpu_clock, measure_cpu=True,
              exclude_disturbed=True)
    for epoch in range(2):
        run_epoch(m, clock, epoch, [0.1] * 10, machine=(machine, 0.5))
    s = m.summary()
    assert s.disturbed_epochs == [1, 2] and s.excluded_epochs == 0 and s.epochs_counted == 2
    assert s.images_per_sec_mean == pytest.approx(100.0)


def measured(machine, clock, epochs, warmup_epochs=0):
    """A meter over ``epochs`` = [(cores busy, step seconds)], 10 steps of batch 10 each."""
    m = meter(clock, 10, warmup_epochs=warmup_epochs, cpu_clock=machine.cpu_clock, measure_cpu=True)
    for epoch, (busy, step) in enumerate(epochs):
        run_epoch(m, clock, epoch, [step] * 10, machine=(machine, busy))
    return m


def test_below_peak_cpu_judges_an_epoch_against_the_run_not_the_machine():
    clock = FakeClock()
    machine = FakeMachine(clock)
    # A small model on a big machine: 0.6 of 2 cores in every epoch, then one epoch on 0.3.
    first = measured(machine, clock, [(0.6, 0.1), (0.6, 0.1), (0.3, 0.2)])
    assert [e.disturbed for e in first.counted_epochs()] == [True, True, True]  # the clock's verdict
    slow = below_peak_cpu(first.counted_epochs())
    assert [slow(e) for e in first.counted_epochs()] == [False, False, True]
    assert below_peak_cpu(first.counted_epochs(), share=0.4)(first.counted_epochs()[-1]) is False
    nothing = meter(clock, 10, warmup_epochs=0)  # fake clock: no CPU time
    run_epoch(nothing, clock, 0, [0.1] * 2)
    assert below_peak_cpu(nothing.counted_epochs())(nothing.counted_epochs()[0]) is False


def test_fake_clock_measures_no_cpu_and_real_clock_does():
    clock = FakeClock()
    out = io.StringIO()
    fake = meter(clock, 10, warmup_epochs=0, json_lines=True, stream=out)
    run_epoch(fake, clock, 0, [0.1] * 2)
    assert math.isnan(fake.summary().cpu_per_wall[0]) and fake.summary().disturbed_epochs == []
    assert "cpu_per_wall" not in json.loads(out.getvalue())
    real = ThroughputMeter(10, warmup_epochs=0, verbose=False, expected_cpus=1)
    real.on_train_begin()
    real.on_epoch_begin(0)
    end = time.process_time() + 0.15
    while time.process_time() < end:
        pass
    time.sleep(0.25)  # CPU and wall apart: a busy loop alone may read > 1 in 10 ms ticks (as test_cpuclock did)
    real.on_train_batch_end(0)
    real.on_epoch_end(0)
    assert 0.0 < real.summary().cpu_per_wall[0] < 0.85  # ≈ 0.4 quiet, less under other load


def test_t_table():
    assert stats.t_critical_95(1) == 12.706
    assert stats.t_critical_95(30) == 2.042
    assert stats.t_critical_95(1000) == 1.960
    with pytest.raises(ValueError):
        stats.t_critical_95(0)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_keras_fit_with_throughput(small_fmnist):
    from course_lib.training.keras2 import keras

    from course_lib.training import callbacks, models, pipeline

    throughput = callbacks.Throughput(64, samples_per_epoch=500, verbose=False)
    assert isinstance(throughput, keras.callbacks.Callback)
    model = models.compile_model(models.build_model(seed=0), keras.optimizers.SGD(0.05))
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
