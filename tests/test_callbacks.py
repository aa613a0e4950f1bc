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
    """mirrored_fmnist.py --ceiling: one fit per epoch, in turn with another model, one meter for all of them."""
    clock = FakeClock()
    out = io.StringIO()
    kept = meter(clock, 10, warmup_epochs=1, keep_across_fits=True, label="ceiling", json_lines=True,
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
    assert lines[0].startswith("epoch 1 (ceiling): ") and lines[0].endswith("(warm-up, not counted)")
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert [(e["epoch"], e["run"], e["warmup"]) for e in events] == [(1, "ceiling", True), (2, "ceiling", False),
                                                                      (3, "ceiling", False)]


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


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_batch_size_sweep_trains_the_batch_sizes_in_turn_and_reports_the_machine(small_fmnist, capsys):
    from course_lib.lessons import experiments

    sweep = experiments.batch_size_sweep(small_fmnist.x_train[:256], small_fmnist.y_train[:256],
                                         [32, 128], rounds=2, warmup_epochs=1)
    table = sweep.table
    assert list(table["batch_size"]) == [32, 128] and list(table["steps_per_epoch"]) == [8, 2]
    assert list(table["epochs_timed"]) == [2, 2]
    assert (table["images_per_sec"] > 0).all() and (table["ci95"] >= 0).all()
    assert (table["cpu_per_wall"] > 0).all()
    assert ((table["disturbed"] >= 0) & (table["disturbed"] <= 2)).all()
    assert sorted(sweep.rates) == [32, 128] and [len(r) for r in sweep.rates.values()] == [2, 2]
    assert 0 <= sweep.rerun_rounds <= 1
    ratio, _, rounds = sweep.ratio(128, 32)
    assert rounds == 2 and ratio == pytest.approx(sum(a / b for a, b in zip(sweep.rates[128], sweep.rates[32])) / 2)
    out = capsys.readouterr().out
    assert "batch sizes 32, 128: 1 warm-up epoch(s) each, then 2 rounds of one epoch each, in turn" in out
    assert "[2/2] round 2" in out


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"batch_sizes": [8], "rounds": 0}, "rounds must be >= 1, got 0"),
    ({"batch_sizes": [8], "warmup_epochs": -1}, "warmup_epochs must be >= 0, got -1"),
    ({"batch_sizes": [8], "max_rerun_rounds": -1}, "max_rerun_rounds must be >= 0, got -1"),
    ({"batch_sizes": [8, 8]}, "batch sizes must be distinct"),
    ({"batch_sizes": [8, 65]}, r"batch sizes must be in 1..64 \(the number of images\), got \[65\]"),
])
def test_batch_size_sweep_refuses_a_design_it_cannot_run(kwargs, message):
    import numpy as np

    from course_lib.lessons import experiments

    with pytest.raises(ValueError, match=message):
        experiments.batch_size_sweep(np.zeros((64, 28, 28), np.uint8), np.zeros(64, np.int64), **kwargs)


class ScriptedTrainer:
    """Stands in for the sweep's trainer: each epoch returns the next scripted (images/s, CPU/wall)."""

    order: list[int] = []
    script: dict[int, list[tuple[float, float]]] = {}

    def __init__(self, images, labels, batch, seed):
        self.batch = batch

    @staticmethod
    def fresh_session():
        pass

    def epoch(self):
        from course_lib.training.throughput import EpochRate

        ScriptedTrainer.order.append(self.batch)
        rate, cpu_per_wall = ScriptedTrainer.script[self.batch].pop(0)
        return EpochRate(rate, 1000.0 * self.batch / rate, cpu_per_wall)


def scripted_sweep(monkeypatch, script, **kwargs):
    import numpy as np

    from course_lib.lessons import experiments

    monkeypatch.setattr(experiments, "_Trainer", ScriptedTrainer)
    ScriptedTrainer.order, ScriptedTrainer.script = [], {b: list(v) for b, v in script.items()}
    return experiments.batch_size_sweep(np.zeros((512, 28, 28), np.uint8), np.zeros(512, np.int64),
                                        sorted(script), progress=False, **kwargs)


def test_batch_size_sweep_rotates_the_order_and_reruns_a_disturbed_round(monkeypatch):
    # warm-up, rounds 1-3, one re-run; round 2's batch-256 epoch lost a core (CPU/wall 0.9 of a best 1.8)
    script = {16: [(300, 1.1), (300, 1.1), (310, 1.1), (290, 1.1), (300, 1.1)],
              256: [(500, 1.8), (600, 1.8), (330, 0.9), (570, 1.8), (630, 1.8)]}
    sweep = scripted_sweep(monkeypatch, script, rounds=3, warmup_epochs=1)
    assert ScriptedTrainer.order == [16, 256, 16, 256, 256, 16, 16, 256, 256, 16]   # the order rotates
    assert sweep.rerun_rounds == 1
    assert sweep.rates == {16: [300, 300, 290], 256: [600, 630, 570]}            # round 2 replaced
    assert list(sweep.table["disturbed"]) == [0, 0] and list(sweep.table["epochs_timed"]) == [3, 3]
    ratio, ci, rounds = sweep.ratio(256, 16)
    assert rounds == 3 and ratio == pytest.approx((2.0 + 2.1 + 570 / 290) / 3) and ci > 0
    with pytest.raises(KeyError, match="batch size 64 was not in the sweep"):
        sweep.ratio(64, 16)


def test_batch_size_sweep_keeps_a_disturbed_round_when_the_budget_is_spent(monkeypatch):
    script = {16: [(300, 1.1)] * 3, 256: [(600, 1.8), (330, 0.9), (320, 0.9)]}
    sweep = scripted_sweep(monkeypatch, script, rounds=2, warmup_epochs=0, max_rerun_rounds=1)
    assert sweep.rerun_rounds == 1 and sweep.rates[256] == [600, 330]
    assert list(sweep.table["disturbed"]) == [0, 1]


@pytest.mark.parametrize(("large", "expected"), [
    ([600, 640, 580, 620, 610], "True"),        # batch 256 twice as fast, round after round
    ([150, 160, 140, 155, 150], "False"),       # batch 256 half as fast: the verdict can fail
    ([200, 420, 290, 350, 260], "cannot tell"),  # a noisy machine: the ratios straddle 1
])
def test_notebook_01_batch_verdict_can_go_each_way(monkeypatch, large, expected):
    from course_lib.lessons import measured

    script = {16: [(300, 1.0)] * 6, 256: [(600, 1.0)] + [(r, 1.0) for r in large]}
    sweep = scripted_sweep(monkeypatch, script, rounds=5, warmup_epochs=1)
    ratio, ci, _ = sweep.ratio(256, 16)
    assert measured.at_least(ratio, ci, 1.0) == expected


def test_epoch_line_prints_the_span_its_rate_divides():
    """Review 2026-11-28 (2a): with warmup_steps the line printed the whole epoch's time beside a rate of the
    span after step 1 (1024 images in 2.65 s; 673.5 images/s). Images / seconds on the line must give its rate."""
    import re

    for warmup_steps, says in ((1, " (from the end of step 1)"), (0, "")):
        clock, out = FakeClock(), io.StringIO()
        m = meter(clock, 64, samples_per_epoch=1024, warmup_epochs=0, warmup_steps=warmup_steps, verbose=True,
                  stream=out)
        run_epoch(m, clock, 0, [0.5] + [0.1] * 15)
        line = out.getvalue()
        images, seconds, rate = re.match(r"epoch 1: (\d+) images in ([\d.]+) s(.*?); ([\d.]+) images/s", line).group(
            1, 2, 4)
        assert float(rate) == pytest.approx(int(images) / float(seconds), rel=1e-3), line
        assert line.startswith(f"epoch 1: {1024 - 64 * warmup_steps} images in") and ("from the end" in line) == bool(says)
        assert says in line


def test_result_line_does_not_report_a_warmup_epoch(capsys):
    """E-10: a run whose only epoch was warm-up ('not counted') printed its rate 'over 1 epoch(s)'. Now its result
    line says there is no images/s; one more epoch and the line reports the counted one."""
    from course_lib.training import epochs, report

    plan = epochs.EpochPlan(640, 64, 1)
    for n_epochs, says in ((1, "no images/s (every epoch of this run was warm-up)"), (2, "images/s over 1 epoch(s)")):
        clock = FakeClock()
        m = meter(clock, 64, samples_per_epoch=640, warmup_epochs=1)
        for epoch in range(n_epochs):
            run_epoch(m, clock, epoch, [0.1] * 10)
        result = report.report_result(scores=(0.5, 0.8), plan=plan, strategy="horovod", epochs=n_epochs,
                                      epochs_run=n_epochs, started=time.perf_counter(), meter=m)
        out = capsys.readouterr().out
        assert says in out, out
        assert result.get("warmup_only", False) is (n_epochs == 1)
