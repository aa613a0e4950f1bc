"""Tests of benchmarks/allreduce.py (section 10) and of the interleaving run.py adds: on synthetic rounds."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import allreduce, run  # noqa: E402

MIB = 2 ** 20
LARGE, SMALL = allreduce.LARGE, allreduce.SMALL


def _samples(horovod_large_s: float, bare_large_s: float = 30e-3, rounds: int = 3) -> dict:
    def same(v):
        return [v * f for f in (0.99, 1.0, 1.01)][:rounds]

    probe = {f"round_trip/tcp/{SMALL}": same(30e-6), f"round_trip/mpi/{SMALL}": same(12e-6),
             f"one_way/tcp/{LARGE}": same(25e-3), f"one_way/mpi/{LARGE}": same(12e-3),
             f"allreduce/tcp/{LARGE}": same(bare_large_s), f"allreduce/mpi/{LARGE}": same(bare_large_s),
             f"copy/memory/{LARGE}": same(13e-3), f"add/memory/{LARGE}": same(15e-3)}
    sweep = {str(SMALL): same(8e-3), str(MIB): same(9e-3), str(LARGE): same(horovod_large_s)}
    return {"probe": probe, "gloo_course": sweep, "mpi_course": sweep, "mpi_cycle1": sweep}


def _row(rows, start):
    (row,) = [r for r in rows if r.measurement.startswith(start)]
    return row


def test_one_stream_is_shown_for_scale_with_no_goal():
    """Issue 52: one TCP stream moves each byte once and adds nothing; no all-reduce can reach it, so its ratios
    carry no goal (the reachable bound's rows do the judging)."""
    chosen = allreduce.settings({"HOROVOD_CYCLE_TIME": "5"})
    shares = (0.9, 0.5, 0.8)
    samples = _samples(1.0)
    samples["gloo_course"] = {**samples["gloo_course"],
                              str(LARGE): [t / s for t, s in zip(samples["probe"][f"one_way/tcp/{LARGE}"], shares)]}
    rows = allreduce.rows(samples, chosen)
    scale = _row(rows, "64 MiB busbw / one TCP stream, gloo")
    assert scale.goal == "" and scale.verdict == "" and "not a reachable limit" in scale.note
    assert scale.spread == pytest.approx((100 * min(shares), 100 * max(shares)))
    latency = _row(rows, "4 KiB latency / tcp round trip, gloo")
    assert latency.value == pytest.approx(8e-3 / 30e-6) and latency.unit == "x"
    path = _row(allreduce.rows(_samples(50e-3, bare_large_s=40e-3), chosen),
                "all-reduce without Horovod (TCP loopback) / one TCP stream")
    assert path.value == pytest.approx(62.5) and path.goal == ""
    fast_path = allreduce.rows(_samples(50e-3, bare_large_s=25e-3), chosen)
    assert _row(fast_path, "64 MiB busbw / all-reduce without Horovod on tcp, gloo").value == pytest.approx(50.0)


def test_a_failed_launch_is_a_row_that_says_so():
    chosen = allreduce.settings({"HOROVOD_CYCLE_TIME": "5"})
    samples = _samples(30e-3)
    samples["mpi_cycle1"] = {}
    rows = allreduce.rows(samples, chosen)
    assert "not measured" in _row(rows, "Horovod all-reduce, mpi, {'HOROVOD_CYCLE_TIME': '1'}").note
    fit = _row(rows, "alpha (latency), gloo")
    assert fit.unit == "ms" and math.isfinite(fit.value)


def test_round_order_and_settings():
    assert allreduce.round_order(["p", "a", "b"], 0) == ["p", "a", "b"]
    assert allreduce.round_order(["p", "a", "b"], 1) == ["b", "a", "p"]
    names = [s.controller for s in allreduce.settings({"HOROVOD_CYCLE_TIME": "5"})]
    assert names == ["gloo", "mpi", "mpi"]


def test_run_interleaved_reverses_the_variants_every_other_round(monkeypatch):
    seen = []
    monkeypatch.setattr(run, "run_variant", lambda v, data, timeout: (seen.append(v.name) or 1.0, None))
    settings = run.make_settings(True, 2)
    variants = [run.Variant(n, n, "python", []) for n in ("a", "b", "c")]
    run.run_interleaved(variants, settings, Path("x"))
    assert seen == ["a", "b", "c", "c", "b", "a"]


def test_callback_section_runs_longer_and_more_rounds_than_the_others():
    full, quick = run.make_settings(False, None), run.make_settings(True, None)
    assert full.callback_rounds >= 8 and full.callback_steps >= 3 * full.inproc_steps
    assert quick.callback_rounds < full.callback_rounds
    assert run.make_settings(False, 12).callback_rounds == 12


def test_in_process_sections_hold_every_core(monkeypatch):
    from course_lib.runner import launch
    from course_lib.training.machine.hardware import cpu_cores

    held = {}

    def fake(script, args, **kw):
        held["slots"] = kw.get("workers")
        raise launch.RunFailedError("stop here", returncode=1, rank=None, tail="", result=None)

    monkeypatch.setattr(launch, "run_python", fake)
    assert run.run_in_process("callback", run.make_settings(True, None), Path("x")) == {}
    assert held["slots"] == cpu_cores()


@pytest.mark.parametrize("extra_us, verdict", [(5.0, "met"), (2000.0, "NOT met"), (700.0, "not resolved")])
def test_the_hook_row_resolves_the_callback_overhead_against_one_percent(extra_us, verdict):
    from benchmarks import report

    fits = [12.0, 12.0, 12.0]                  # 120 steps of 100 ms
    without = [20e-6, 21e-6, 19e-6]
    jitter = [0.0, 0.0, 600e-6] if verdict == "not resolved" else [0.0, 0.0, 0.0]
    hooks = {"hooks_without": without, "hooks_with": [w + extra_us * 1e-6 + j for w, j in zip(without, jitter)]}
    (_, _, row) = report.section4_hook_rows(hooks, fits, 120)
    assert row.verdict == verdict
    assert row.value == pytest.approx(100 * extra_us * 1e-6 / 0.1)
    assert report.section4_hook_rows({}, fits, 120) == []


def test_the_bound_rows_divide_the_bound_by_each_time_of_the_same_launch():
    """Issue 52: Horovod's and the bare all-reduce's 64 MiB time against the reachable bound of the same launch."""
    chosen = allreduce.settings({"HOROVOD_CYCLE_TIME": "5"})
    samples = _samples(80e-3)
    for name in ("gloo_course", "mpi_course", "mpi_cycle1"):
        samples[name] = {**samples[name], "bound": [40e-3] * 3, "bare": [50e-3, 40e-3, 32e-3]}
    rows = allreduce.rows(samples, chosen)
    horovod = _row(rows, "64 MiB: the reachable bound / Horovod's time, gloo")
    bare = _row(rows, "64 MiB: the reachable bound / without Horovod's time, gloo")
    assert horovod.value == pytest.approx(40 / 80, rel=0.02) and horovod.unit == "x"
    assert bare.value == pytest.approx(1.0) and bare.spread == pytest.approx((0.8, 1.25))   # a round above 1 shows
    assert not [r for r in rows if r.measurement.startswith("alpha") and "no fit" in r.note]  # "bound" is no size


def test_run_section_reads_the_bound_of_each_launch(monkeypatch):
    """The bound of a launch: two exchanges of S/2 each way plus the add of S/2 (means over its rounds)."""
    from course_lib.runner import launch

    class Result:
        def __init__(self, events):
            self.events = [(0, e) for e in events]

    def fake(script, args, **kwargs):
        if "--bound" not in args:                                 # the probe
            return Result([])
        return Result([{"event": "allreduce", "bytes": LARGE, "median_s": 70e-3},
                       {"event": "bound", "exchange_s": [18e-3, 20e-3], "add_s": [4e-3, 4e-3],
                        "bare_s": [40e-3, 42e-3]}])

    monkeypatch.setattr(launch, "run_horovod", fake)
    found = allreduce.run_section(allreduce.settings({"HOROVOD_CYCLE_TIME": "5"})[:1], rounds=2, repeats=1,
                                  probe_rounds=1, timeout_s=1, printer=lambda line: None)
    assert found["gloo_course"]["bound"] == pytest.approx([42e-3, 42e-3])
    assert found["gloo_course"]["bare"] == pytest.approx([41e-3, 41e-3])
