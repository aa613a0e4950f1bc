"""Tests of course_lib.lessons.communication.timeline on real Horovod timelines and on exact synthetic traces.

Fixtures (recorded on the course machine with horovod 0.28.1, Gloo, 2 workers):

* ``fixtures/horovod_timeline.json``: ``horovodrun -np 2 --gloo --timeline-filename F python
  source_code/horovod_fmnist.py --train-subset 512 --test-subset 128 --batch-size 64 --epochs 2
  --threads-per-worker 1`` (HOROVOD_CYCLE_TIME=5, the script's CPU default), cut in Horovod's own
  text layout after the 6th training step (``trim_timeline(events, 6)`` keeps the same events).
* ``fixtures/horovod_timeline_fp16.json``: ``HOROVOD_CYCLE_TIME=5 horovodrun -np 2 --gloo
  --timeline-filename F python source_code/allreduce_bench.py --min-bytes 4096 --max-bytes 4096
  --repeats 2 --warmup 1 --compression fp16`` (whole file).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from course_lib.lessons.communication import timeline  # noqa: E402
from course_lib.lessons.communication.timeline import TimelineError  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "horovod_timeline.json"
FP16 = FIXTURES / "horovod_timeline_fp16.json"
# The course CNN's gradients (course_lib.training.models): 1 199 882 float32 parameters.
SHAPES = {"[3, 3, 1, 32]", "[32]", "[3, 3, 32, 64]", "[64]", "[9216, 128]", "[128]", "[128, 10]",
          "[10]"}


@pytest.fixture(scope="module")
def real_table():
    return timeline.phase_table(timeline.read_timeline(REAL))


def test_fixtures_are_small_real_timelines():
    assert REAL.stat().st_size < 200_000 and FP16.stat().st_size < 200_000
    assert REAL.read_text().startswith("[\n{\"name\": \"process_name\", \"ph\": \"M\"")


def test_real_timeline_has_the_course_models_gradients_every_step(real_table):
    steps = real_table[real_table["step"] >= 0]
    assert sorted(steps["step"].unique()) == [0, 1, 2, 3, 4, 5]
    for _, group in steps.groupby("step"):
        assert group["tensor"].nunique() == 8
        closing = group[(group["phase"] == "ALLREDUCE")]
        assert set(closing["shape"]) == SHAPES
        assert set(closing["dtype"]) == {"float32"}
    params = sum(math.prod(json.loads(s)) for s in SHAPES)
    assert params == 1_199_882
    phases = set(real_table["phase"])
    assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "GLOO_ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER",
            "MEMCPY_OUT_FUSION_BUFFER", "NEGOTIATE_BROADCAST", "BROADCAST"} <= phases
    # The initial broadcasts are not steps.
    assert (real_table[real_table["phase"] == "BROADCAST"]["step"] == -1).all()
    nested = real_table[real_table["phase"] == "GLOO_ALLREDUCE"]
    assert (nested["depth"] == 1).all()
    gradients = nested["tensor"].str.contains("HorovodAllreduce_grads")
    assert (nested[gradients]["step"] >= 0).all() and (nested[~gradients]["step"] == -1).all()


def test_step_times_are_consistent(real_table):
    steps = timeline.step_times(real_table)
    assert list(steps["step"]) == [0, 1, 2, 3, 4, 5]
    assert (steps["interval_ms"].iloc[:-1] > 0).all() and math.isnan(steps["interval_ms"].iloc[-1])
    assert (steps["start_ms"] <= steps["ready_ms"]).all()
    assert (steps["ready_ms"] <= steps["end_ms"]).all()
    assert (steps["comm_ms"] > 0).all()
    assert (steps["comm_ms"] <= steps["end_ms"] - steps["start_ms"]).all()
    assert (steps["overlap_ms"] <= steps["comm_ms"] + 1e-9).all()


def test_step_summary_counts_a_fused_phase_once(real_table):
    summary = timeline.step_summary(real_table, 3).set_index("phase")
    assert summary.loc["ALLREDUCE", "tensors"] == 8
    assert summary.loc["ALLREDUCE", "dtypes"] == "float32"
    assert summary.loc["MEMCPY_IN_FUSION_BUFFER", "count"] < summary.loc[
        "MEMCPY_IN_FUSION_BUFFER", "tensors"]  # several tensors copied in one fused batch
    assert summary.loc["GLOO_ALLREDUCE", "wall_ms"] <= summary.loc["ALLREDUCE", "wall_ms"]


def test_fp16_compression_shows_as_float16():
    table = timeline.phase_table(timeline.read_timeline(FP16))
    closing = table[table["phase"] == "ALLREDUCE"]
    assert set(closing[closing["shape"] == "[1024]"]["dtype"]) == {"float16"}
    assert set(closing[closing["shape"] == "[1]"]["dtype"]) == {"float32"}


def test_trim_keeps_the_first_steps(real_table):
    events = timeline.read_timeline(REAL)
    trimmed = timeline.phase_table(timeline.trim_timeline(events, 2))
    assert sorted(trimmed[trimmed["step"] >= 0]["step"].unique()) == [0, 1]
    with pytest.raises(ValueError, match="fewer than 7"):
        timeline.trim_timeline(events, 7)


# -- files being written, truncated, empty ------------------------------------------------------
def test_a_file_still_being_written_is_read_up_to_its_last_whole_event(tmp_path):
    text = REAL.read_text()
    complete = timeline.read_timeline(REAL)
    cut = text.rstrip().rstrip("]")  # no closing bracket yet
    half = cut[: cut.rindex("{") + 15]  # and a half-written last event
    for body, expected in ((cut, len(complete)), (cut + ",\n", len(complete)),
                           (half, len(complete) - 1)):
        path = tmp_path / "partial.json"
        path.write_text(body)
        assert len(timeline.read_timeline(path)) == expected
    table = timeline.phase_table(timeline.read_timeline(path))
    assert table["end_ms"].notna().all()  # the phase left open is dropped, not invented


@pytest.mark.parametrize("body", ["[", "[\n", "[\n{\"name\": \"process_name\", \"ph\": \"M\", "
                                  "\"pid\": 0, \"args\": {}},\n", "[\n{\"ph\": \"B\", \"na"])
def test_a_file_without_events_says_why(tmp_path, body):
    path = tmp_path / "timeline.json"
    path.write_text(body)
    with pytest.raises(TimelineError, match=r"holds no timeline event .*'\['"):
        timeline.read_timeline(path)


def test_missing_or_foreign_files(tmp_path):
    with pytest.raises(TimelineError, match="--timeline-filename"):
        timeline.read_timeline(tmp_path / "nope.json")
    path = tmp_path / "object.json"
    path.write_text('{"traceEvents": []}')
    with pytest.raises(TimelineError, match="does not start with"):
        timeline.read_timeline(path)


# -- exact arithmetic on a synthetic trace --------------------------------------------------------
def _trace() -> list[dict]:
    meta = [{"name": "process_name", "ph": "M", "pid": p, "args": {"name": n}}
            for p, n in ((1, "grad_a"), (2, "grad_b"), (3, "metric"))]
    ev = []
    for t0 in (1000, 11000):
        # grad_a announced at t0, grad_b 4 ms later; a's all-reduce runs t0+1..t0+3 ms (before b
        # is ready), b's t0+5..t0+6 ms.
        ev += [{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": t0, "pid": 1},
               {"ph": "E", "ts": t0 + 1000, "pid": 1},
               {"ph": "B", "name": "ALLREDUCE", "ts": t0 + 1000, "pid": 1},
               {"ph": "B", "name": "GLOO_ALLREDUCE", "ts": t0 + 1000, "pid": 1},
               {"ph": "E", "ts": t0 + 3000, "pid": 1},
               {"ph": "E", "ts": t0 + 3000, "pid": 1, "args": {"dtype": "float32", "shape": "[4]"}},
               {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": t0 + 4000, "pid": 2},
               {"ph": "X", "name": "0", "ts": t0 + 4000, "pid": 2, "dur": 0},
               {"ph": "E", "ts": t0 + 5000, "pid": 2},
               {"ph": "B", "name": "ALLREDUCE", "ts": t0 + 5000, "pid": 2},
               {"ph": "B", "name": "GLOO_ALLREDUCE", "ts": t0 + 5000, "pid": 2},
               {"ph": "E", "ts": t0 + 6000, "pid": 2},
               {"ph": "E", "ts": t0 + 6000, "pid": 2, "args": {"dtype": "float16", "shape": "[2]"}}]
    ev += [{"ph": "B", "name": "ALLREDUCE", "ts": 30000, "pid": 3},
           {"ph": "E", "ts": 30500, "pid": 3}]
    return meta + ev


def test_phase_table_and_step_times_exact():
    table = timeline.phase_table(_trace())
    assert len(table) == 2 * 6 + 1
    first = table.iloc[0]
    assert (first["tensor"], first["phase"], first["start_ms"], first["duration_ms"]) == (
        "grad_a", "NEGOTIATE_ALLREDUCE", 0.0, 1.0)
    assert set(table[table["tensor"] == "metric"]["step"]) == {-1}  # not every step
    gloo = table[table["phase"] == "GLOO_ALLREDUCE"]
    assert list(gloo["step"]) == [0, 0, 1, 1] and list(gloo["depth"]) == [1, 1, 1, 1]
    steps = timeline.step_times(table)
    assert steps[["start_ms", "ready_ms", "end_ms", "comm_ms", "overlap_ms"]].values.tolist() == [
        [0.0, 4.0, 6.0, 3.0, 2.0], [10.0, 14.0, 16.0, 3.0, 2.0]]
    assert steps["interval_ms"].iloc[0] == 10.0
    summary = timeline.step_summary(table, 1).set_index("phase")
    assert summary.loc["ALLREDUCE", "dtypes"] == "float16,float32"
    assert summary.loc["GLOO_ALLREDUCE", "wall_ms"] == 3.0


def test_plot_step_draws_one_bar_per_phase(real_table):
    import matplotlib.pyplot as plt

    ax = timeline.plot_step(real_table, 3)
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert len(bars) == len(real_table[real_table["step"] == 3])
    assert len(ax.get_yticklabels()) == 8
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="no phases for step 99"):
        timeline.plot_step(real_table, 99)


def test_every_chart_gives_a_phase_the_same_colour():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.colors import to_hex

    def colours(events):
        table = timeline.phase_table(events)
        ax = timeline.plot_step(table, 0)
        found = {t.get_text(): to_hex(h.get_facecolor()) for h, t in zip(ax.get_legend().legend_handles,
                                                                         ax.get_legend().get_texts())}
        plt.close(ax.figure)
        return found

    def trace(phases):   # one tensor, one step: nested phases in the given order
        events, ts = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "grad"}}], 0
        events += [{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "pid": 1, "ts": 0}, {"ph": "E", "pid": 1, "ts": 5},
                   {"ph": "B", "name": "ALLREDUCE", "pid": 1, "ts": 10}]
        for ts, name in enumerate(phases, start=11):
            events += [{"ph": "B", "name": name, "pid": 1, "ts": 10 * ts}, {"ph": "E", "pid": 1, "ts": 10 * ts + 5}]
        return events + [{"ph": "E", "pid": 1, "ts": 1000, "args": {"dtype": "float32", "shape": "[1]"}}]

    fused = colours(trace(["MEMCPY_IN_FUSION_BUFFER", "GLOO_ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER"]))
    alone = colours(trace(["GLOO_ALLREDUCE"]))
    assert alone["GLOO_ALLREDUCE"] == fused["GLOO_ALLREDUCE"] == timeline.PHASE_COLOURS["GLOO_ALLREDUCE"]
    assert len(set(fused.values())) == len(fused)                 # distinct phases, distinct colours
    assert timeline.phase_colour("SOMETHING_NEW") == timeline.phase_colour("OTHER_NEW")


def test_negotiation_skew_reads_the_ranks_ticks():
    meta = [{"ph": "M", "name": "process_name", "pid": p, "args": {"name": f"grad{p}"}} for p in (1, 2)]
    events = meta
    for start in (0, 1000):
        for pid, late in ((1, 300), (2, 5)):
            base = start + 10 * pid
            events += [{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "pid": pid, "ts": base},
                       {"ph": "X", "name": "0", "pid": pid, "ts": base, "dur": 0},
                       {"ph": "X", "name": "1", "pid": pid, "ts": base + late, "dur": 0},
                       {"ph": "E", "pid": pid, "ts": base + late + 1},
                       {"ph": "B", "name": "ALLREDUCE", "pid": pid, "ts": base + late + 2},
                       {"ph": "E", "pid": pid, "ts": base + late + 50, "args": {"shape": "[1]"}}]
    table = timeline.phase_table(events)
    skew = timeline.negotiation_skew(events, table)
    assert len(skew) == 4 and set(skew["last_rank"]) == {1}
    assert sorted(skew["skew_ms"].round(3)) == [0.005, 0.005, 0.3, 0.3]
    assert (skew["negotiate_ms"] - skew["skew_ms"]).round(3).tolist() == [0.001] * 4
