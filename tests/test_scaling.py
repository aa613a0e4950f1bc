"""Tests of course_lib.lessons.common.scaling: table arithmetic, modes, persistence, plot."""

from __future__ import annotations

import json

import pytest

from course_lib.lessons.common import scaling
from course_lib.lessons.common.scaling import RunRecord


def weak_records():
    return [RunRecord(1, 64, 64, 1000.0), RunRecord(2, 64, 128, 1800.0),
            RunRecord(4, 64, 256, 3000.0)]


def test_weak_table_values():
    table = scaling.scaling_table(weak_records())
    assert list(table["devices"]) == [1, 2, 4]
    assert list(table["speedup"]) == pytest.approx([1.0, 1.8, 3.0])
    assert list(table["efficiency"]) == pytest.approx([1.0, 0.9, 0.75])
    assert set(table["mode"]) == {"weak"}
    assert list(table.columns[:7]) == ["devices", "per_device_batch", "global_batch",
                                       "images_per_sec", "speedup", "efficiency", "mode"]


def test_strong_table_and_median_of_repeats():
    records = [RunRecord(1, 256, 256, 1000.0), RunRecord(2, 128, 256, 1500.0),
               RunRecord(2, 128, 256, 1700.0), RunRecord(2, 128, 256, 100.0)]
    table = scaling.scaling_table(records)
    row = table[table["devices"] == 2].iloc[0]
    assert row["images_per_sec"] == 1500.0 and row["runs"] == 3
    assert row["speedup"] == pytest.approx(1.5) and row["efficiency"] == pytest.approx(0.75)
    assert set(table["mode"]) == {"strong"}


def test_mixed_weak_and_strong_raises():
    records = weak_records() + [RunRecord(4, 16, 64, 2000.0)]
    with pytest.raises(scaling.MixedScalingError):
        scaling.scaling_table(records)
    with pytest.raises(scaling.MixedScalingError):
        scaling.scaling_table(weak_records(), mode="strong")


def test_baseline_required():
    with pytest.raises(ValueError, match="1-device baseline"):
        scaling.scaling_table([RunRecord(2, 64, 128, 1800.0), RunRecord(4, 64, 256, 3000.0)])


def test_to_record_from_result_event_and_objects():
    event = {"event": "result", "workers": 2, "per_worker_batch": 64, "global_batch": 128,
             "images_per_sec": 1800.5, "images_per_sec_ci95": 12.0, "strategy": "horovod"}
    record = scaling.to_record(event)
    assert (record.devices, record.per_device_batch, record.global_batch) == (2, 64, 128)
    assert record.strategy == "horovod" and record.extra["images_per_sec_ci95"] == 12.0
    assert scaling.to_record({"devices": 2, "batch_size_per_replica": 32,
                              "images_per_sec": 5}).global_batch == 64

    class Result:  # the launcher's RunResult: its ``result`` event becomes the record
        events: list = []
        result = {"workers": 1, "per_worker_batch": 64, "images_per_sec": 900.0}

    assert scaling.to_record(Result(), label="x").label == "x"
    assert scaling.to_record(RunRecord(1, 64, 64, 900.0), label="y").label == "y"
    with pytest.raises(ValueError, match="images_per_sec"):
        scaling.to_record({"devices": 1, "per_device_batch": 64})
    with pytest.raises(TypeError):
        scaling.to_record(3.5)
    with pytest.raises(ValueError):
        RunRecord(0, 64, 64, 10.0)


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "runs" / "records.json"
    records = weak_records()
    records[0].extra = {"note": "baseline"}
    scaling.save_records(path, records)
    assert scaling.load_records(path) == records
    assert isinstance(json.loads(path.read_text()), list)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        scaling.load_records(path)


def test_plot_has_throughput_and_efficiency():
    fig = scaling.plot_scaling(scaling.scaling_table(weak_records()), title="weak")
    assert len(fig.axes) == 2
    measured = fig.axes[0].get_lines()[1]
    assert list(measured.get_ydata()) == [1000.0, 1800.0, 3000.0]
    ideal = fig.axes[0].get_lines()[0]
    assert list(ideal.get_ydata()) == [1000.0, 2000.0, 4000.0]
    assert list(fig.axes[1].get_lines()[1].get_ydata()) == pytest.approx([100.0, 90.0, 75.0])


def test_efficiency_interval_propagates_the_runs_intervals() -> None:
    records = [{"workers": 1, "per_worker_batch": 64, "images_per_sec": 1000.0, "images_per_sec_ci95": 100.0},
               {"workers": 2, "per_worker_batch": 64, "images_per_sec": 1500.0, "images_per_sec_ci95": 150.0}]
    table = scaling.scaling_table(records).set_index("devices")
    assert table.loc[2, "efficiency"] == pytest.approx(0.75)
    assert table.loc[2, "efficiency_ci95"] == pytest.approx(0.75 * (0.1 ** 2 + 0.1 ** 2) ** 0.5)
    assert table.loc[1, "efficiency_ci95"] == 0.0
    no_interval = scaling.scaling_table(weak_records())
    assert no_interval["efficiency_ci95"].isna().all()


def test_to_record_accepts_the_launchers_run_result() -> None:
    from course_lib.runner.runlog import RunResult

    run = RunResult(command=["horovodrun"])
    run.result = {"event": "result", "workers": 2, "per_worker_batch": 64, "global_batch": 128,
                  "images_per_sec": 1300.0, "images_per_sec_ci95": 90.0}
    record = scaling.to_record(run, label="horovod")
    assert (record.devices, record.global_batch, record.label) == (2, 128, "horovod")
    assert record.extra["images_per_sec_ci95"] == 90.0
    with pytest.raises(ValueError, match="no JSON 'result'"):
        scaling.to_record(RunResult(command=["horovodrun"]))


def test_plot_draws_the_intervals_and_a_measured_yardstick() -> None:
    records = [{"workers": 1, "per_worker_batch": 64, "images_per_sec": 1000.0, "images_per_sec_ci95": 100.0},
               {"workers": 2, "per_worker_batch": 64, "images_per_sec": 1500.0, "images_per_sec_ci95": 150.0}]
    table = scaling.scaling_table(records)
    assert list(table["images_per_sec_ci95"]) == [100.0, 150.0]
    fig = scaling.plot_scaling(table, yardstick=("one device, global batch 128", 1700.0))
    rate_bars = [c for c in fig.axes[0].containers]
    assert len(rate_bars) == 1 and rate_bars[0].has_yerr          # the measured points carry their interval
    segments = rate_bars[0].lines[2][0].get_segments()
    assert [float(s[1][1] - s[0][1]) for s in segments] == pytest.approx([200.0, 300.0])
    drawn = [line for line in fig.axes[0].get_lines() if list(line.get_ydata()) == [1700.0, 1700.0]]
    assert len(drawn) == 1 and drawn[0].get_label() == "one device, global batch 128"
    assert fig.axes[1].containers[0].has_yerr
    no_interval = scaling.plot_scaling(scaling.scaling_table(weak_records()))
    assert not no_interval.axes[0].containers[0].has_yerr            # no interval measured: no bar drawn


@pytest.mark.parametrize("two_replicas, expected", [(2400.0, "True"), (1000.0, "False"), (1650.0, "cannot tell")])
def test_notebook_02_strong_scaling_verdict_can_go_each_way(two_replicas, expected) -> None:
    """02's verdict: 2 replicas against one device with the same global batch (the one-process yardstick)."""
    from course_lib.lessons.common import measured

    one_process = RunRecord(1, 128, 128, 1600.0, extra={"images_per_sec_ci95": 80.0})
    two = RunRecord(2, 64, 128, two_replicas, extra={"images_per_sec_ci95": 80.0})
    row = scaling.scaling_table([one_process, two], mode="strong").iloc[-1]
    speedup, half_width = row["speedup"], 2 * row["efficiency_ci95"]
    assert measured.at_least(speedup, half_width, 1.0) == expected
