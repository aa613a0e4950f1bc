"""Tests of course_lib.lessons.communication.allreduce_model: the alpha-beta fit, bandwidths, the self-check."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from course_lib.lessons.common.ring import ring_factor  # noqa: E402
from course_lib.lessons.communication import allreduce_model as am  # noqa: E402
from course_lib.lessons.communication import checks as communication  # noqa: E402
from course_lib.lessons.communication.allreduce_model import AlphaBeta  # noqa: E402

SIZES = [4096 * 4 ** k for k in range(8)]  # 4 KiB .. 64 MiB, as the bench measures


def test_ring_factor_comes_from_notebook_01s_formula():
    assert ring_factor(1) == 0.0
    assert ring_factor(2) == 1.0
    assert ring_factor(4) == 1.5
    assert ring_factor(8) == 1.75
    for bad in (0, -2, 2.0, True, "2"):
        with pytest.raises(ValueError, match="int >= 1"):
            ring_factor(bad)


def test_bandwidths_follow_nccl_tests():
    assert am.algorithm_bandwidth(2e9, 0.5) == 4.0
    assert am.bus_bandwidth(4.0, 2) == 4.0
    assert am.bus_bandwidth(4.0, 4) == 6.0
    with pytest.raises(ValueError):
        am.algorithm_bandwidth(1, 0)


@pytest.mark.parametrize("workers", [2, 4])
def test_fit_recovers_alpha_and_beta_exactly(workers):
    truth = AlphaBeta(alpha_s=1.5e-3, beta_bytes_per_s=0.8e9, workers=workers)
    times = truth.predict(np.array(SIZES, dtype=float))
    fit = am.fit_alpha_beta(SIZES, times, workers)
    assert fit.alpha_s == pytest.approx(1.5e-3, rel=1e-9)
    assert fit.beta_bytes_per_s == pytest.approx(0.8e9, rel=1e-9)
    assert fit.rms_relative_error < 1e-9
    assert "alpha (latency) = 1500.0 us" in fit.describe() and "0.800 GB/s" in fit.describe()


def test_fit_weighs_small_messages_like_large_ones():
    truth = AlphaBeta(2e-3, 1e9, 2)
    times = truth.predict(np.array(SIZES, dtype=float))
    noisy = times * np.array([1.1, 0.9, 1.1, 0.9, 1.1, 0.9, 1.1, 0.9])
    fit = am.fit_alpha_beta(SIZES, noisy, 2)
    assert fit.alpha_s == pytest.approx(2e-3, rel=0.1)  # an unweighted fit misses alpha badly
    assert fit.beta_bytes_per_s == pytest.approx(1e9, rel=0.1)
    assert 0.05 < fit.rms_relative_error < 0.15


def test_negative_intercept_is_clamped_to_zero_latency():
    sizes = np.array([1e6, 2e6, 4e6])
    fit = am.fit_alpha_beta(sizes, sizes / 1e9 - 1e-4, 2)
    assert fit.alpha_s == 0.0 and fit.beta_bytes_per_s > 0


@pytest.mark.parametrize("sizes, times, workers, match", [
    ([4096], [1e-3], 2, "two distinct"),
    ([4096, 4096], [1e-3, 2e-3], 2, "two distinct"),
    ([4096, 8192], [1e-3], 2, "one time per size"),
    ([4096, 8192], [1e-3, 0.0], 2, "positive"),
    ([4096, 8192], [1e-3, 2e-3], 1, "N >= 2"),
    ([4096, 8192], [2e-3, 1e-3], 2, "do not grow"),
])
def test_fit_rejects_bad_input(sizes, times, workers, match):
    with pytest.raises(ValueError, match=match):
        am.fit_alpha_beta(sizes, times, workers)


def test_prediction_for_other_worker_counts_scales_hops_and_bytes():
    model = AlphaBeta(alpha_s=1e-3, beta_bytes_per_s=1e9, workers=2)
    assert model.predict(1e9) == pytest.approx(1e-3 + 1.0)
    # 8 workers: 7 times the hops of 2 workers, 2*7/8 of the bytes per link.
    assert model.predict(1e9, workers=8) == pytest.approx(7e-3 + 1.75)
    assert model.predict(np.array([0.0, 1e9])).tolist() == pytest.approx([1e-3, 1.001])


def _events(controller="gloo"):
    return [{"event": "config"}] + [
        {"event": "allreduce", "bytes": s, "median_s": 1e-3 + s / 1e9, "q1_s": 0.9e-3 + s / 1e9,
         "q3_s": 1.1e-3 + s / 1e9, "algbw_gbps": s / (1e-3 + s / 1e9) / 1e9,
         "busbw_gbps": s / (1e-3 + s / 1e9) / 1e9, "controller": controller, "workers": 2,
         "compression": "none"} for s in reversed(SIZES)]


def test_bench_table_and_plot():
    import matplotlib.pyplot as plt

    table = am.bench_table(_events("gloo") + _events("mpi"))
    assert len(table) == 16 and list(table["bytes"][:2]) == [4096, 4096]
    assert table["median_ms"].iloc[0] == pytest.approx(1.0 + 4096 / 1e6)
    fits = {name: am.fit_alpha_beta(g["bytes"], g["median_ms"] / 1e3, 2)
            for name, g in table.groupby("controller")}
    assert fits["gloo"].alpha_s == pytest.approx(1e-3)
    ax = am.plot_fit(table, fits)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert len(ax.get_lines()) >= 2 and len(ax.get_legend().get_texts()) == 4
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="--json"):
        am.bench_table([{"event": "config"}])


def test_bench_table_keeps_one_row_per_cycle_time_and_size():
    cycles = [dict(e, cycle_time_ms=c) for c in (5.0, 1.0) for e in _events("gloo") if e["event"] == "allreduce"]
    table = am.bench_table(cycles)
    assert len(table) == 16 and list(table["cycle_ms"].unique()) == [1.0, 5.0]       # sorted by cycle, then size
    assert list(table[table["cycle_ms"] == 5]["bytes"]) == sorted(SIZES)
    assert am.bench_table(_events("gloo"))["cycle_ms"].isna().all()                  # a line without it: NaN


def test_check_prediction(capsys):
    model = AlphaBeta(alpha_s=1e-3, beta_bytes_per_s=1e9, workers=2)
    size = 16 * 2 ** 20
    right = 1e-3 + size / 1e9
    assert communication.check_prediction(None, fit=model, size_bytes=size, workers=2) is False
    assert "not answered yet" in capsys.readouterr().out
    assert communication.check_prediction(right * 1.02, fit=model, size_bytes=size, workers=2) is True
    assert "correct" in capsys.readouterr().out
    assert communication.check_prediction(size / 1e9 / 2, fit=model, size_bytes=size, workers=2) is False
    assert "Hint" in capsys.readouterr().out
    assert communication.check_prediction("soon", fit=model, size_bytes=size, workers=2) is False
    assert communication.check_prediction(math.nan, fit=model, size_bytes=size, workers=2) is False
    capsys.readouterr()
    communication.check_prediction(right, fit=model, size_bytes=size, workers=2, measured_s=right * 2,
                        measured_iqr_s=(right * 1.5, right * 2.5))
    out = capsys.readouterr().out
    assert "-50%" in out and "inside the measured IQR: False" in out
    communication.check_prediction(right, fit=model, size_bytes=size, workers=2, measured_s=right,
                        measured_iqr_s=(right * 0.9, right * 1.1))
    assert "inside the measured IQR: True" in capsys.readouterr().out


def test_the_cycle_wait_is_paid_once_per_call_and_the_hops_per_hop():
    size = 16 * 2 ** 20
    model = AlphaBeta(alpha_s=6e-3, beta_bytes_per_s=1e9, workers=2, alpha_call_s=5e-3)
    assert model.alpha_per_hop() == pytest.approx(0.5e-3)                       # (6 - 5) ms over 2 hops
    assert model.predict(size) == pytest.approx(6e-3 + size / 1e9)              # the fit's own N: all of alpha
    assert model.predict(size, 8) == pytest.approx(5e-3 + 14 * 0.5e-3 + 1.75 * size / 1e9)
    all_hops = AlphaBeta(alpha_s=6e-3, beta_bytes_per_s=1e9, workers=2)        # no cycle part measured
    assert all_hops.predict(size, 8) == pytest.approx(7 * 6e-3 + 1.75 * size / 1e9)
    with pytest.raises(ValueError, match="part of alpha"):
        AlphaBeta(alpha_s=1e-3, beta_bytes_per_s=1e9, workers=2, alpha_call_s=2e-3)


def test_exercise_2_rejects_the_model_that_multiplies_the_whole_alpha(capsys):
    size = 16 * 2 ** 20
    model = AlphaBeta(alpha_s=6e-3, beta_bytes_per_s=1e9, workers=2, alpha_call_s=5e-3)
    assert communication.check_prediction(5e-3 + 7e-3 + 1.75 * size / 1e9, fit=model, size_bytes=size, workers=8) is True
    assert communication.check_prediction(42e-3 + 1.75 * size / 1e9, fit=model, size_bytes=size, workers=8) is False
    assert communication.check_prediction(6e-3 + 1.75 * size / 1e9, fit=model, size_bytes=size, workers=8) is False
    assert "once per hop" in capsys.readouterr().out


def test_with_hop_charges_the_measured_hop_and_the_rest_once_per_call():
    size = 16 * 2 ** 20
    fit = AlphaBeta(alpha_s=6e-3, beta_bytes_per_s=1e9, workers=2).with_hop(15e-6)
    assert fit.alpha_call_s == pytest.approx(6e-3 - 2 * 15e-6) and fit.alpha_per_hop() == pytest.approx(15e-6)
    assert fit.predict(size) == pytest.approx(6e-3 + size / 1e9)                  # unchanged at its own N
    assert fit.predict(size, 8) == pytest.approx(6e-3 - 30e-6 + 14 * 15e-6 + 1.75 * size / 1e9)
    with pytest.raises(ValueError, match="must fit in alpha_s"):
        AlphaBeta(alpha_s=1e-5, beta_bytes_per_s=1e9, workers=2).with_hop(1e-5)
    with pytest.raises(ValueError, match="must fit"):
        AlphaBeta(alpha_s=1e-3, beta_bytes_per_s=1e9, workers=2).with_hop(-1e-6)


def test_misfit_table_says_where_the_line_holds():
    import pandas as pd

    fit = AlphaBeta(alpha_s=1e-3, beta_bytes_per_s=1e9, workers=2)
    sizes = [4096, 2 ** 20, 64 * 2 ** 20]
    model_ms = [fit.predict(s) * 1e3 for s in sizes]
    measured = [model_ms[0], model_ms[1], 2 * model_ms[2]]              # the largest size twice the line
    group = pd.DataFrame({"bytes": sizes, "median_ms": measured, "q1_ms": [m * 0.9 for m in measured],
                          "q3_ms": [m * 1.1 for m in measured]})
    table = am.misfit_table(group, fit)
    assert table["inside_iqr"].tolist() == [True, True, False]
    assert table["misfit"].tolist() == pytest.approx([0.0, 0.0, 0.5])
