"""Tests of course_lib.lessons.communication.transport: figures with intervals, the limit, and the per-byte verdicts."""

from __future__ import annotations

import math

import pytest

from course_lib.lessons.communication import transport
from course_lib.lessons.communication.transport import Figure

MIB = 2 ** 20


def _events(scale64: float = 1.0, horovod_scale: float = 1.0) -> list[dict]:
    """A probe's lines: 3 rounds each; the 64 MiB memory parts take ``scale64`` x the 16 MiB ones' time per byte."""
    def line(what, where, nbytes, base):
        return {"event": "transport", "what": what, "transport": where, "bytes": nbytes,
                "seconds": [base * 0.98, base, base * 1.02]}

    out = [line("round_trip", "tcp", 4096, 30e-6), line("one_way", "tcp", 64 * MIB, 25e-3),
           line("round_trip", "mpi", 4096, 12e-6), line("one_way", "mpi", 64 * MIB, 12e-3)]
    for where, per_byte in (("tcp", 3e-9), ("mpi", 2e-9)):
        out += [line("allreduce", where, 4096, 40e-6), line("allreduce", where, 16 * MIB, per_byte * 16 * MIB),
                line("allreduce", where, 64 * MIB, per_byte * 64 * MIB * horovod_scale)]
    for what in ("copy", "add", "fresh_fill"):
        out += [line(what, "memory", 16 * MIB, 0.5e-9 * 16 * MIB), line(what, "memory", 64 * MIB, 0.5e-9 * 64 * MIB * scale64)]
    return out + [{"event": "done"}]


def test_figure_is_the_mean_over_rounds_with_a_t_interval():
    fig = Figure.of([1.0, 2.0, 3.0])
    assert (fig.seconds, fig.rounds) == (2.0, 3)
    assert fig.half_width_s == pytest.approx(4.303 * 1.0 / math.sqrt(3))   # t(2) x sd / sqrt(n)
    rate, low, high = Figure(2.0, 1.0, 3).rate_gbps(4e9)
    assert (rate, low, high) == (2.0, pytest.approx(4 / 3), 4.0)           # slower end -> lower rate
    assert math.isnan(Figure.of([5.0]).half_width_s)


def test_ratio_combines_relative_half_widths():
    value, half = transport.ratio(Figure(10.0, 1.0, 5), Figure(2.0, 0.2, 5))
    assert value == 5.0 and half == pytest.approx(5.0 * math.hypot(0.1, 0.1))


def test_limit_of_each_transport():
    figures = transport.probe_figures(_events())
    tcp = transport.limit(figures, "tcp")
    assert tcp.hop_s == pytest.approx(15e-6) and tcp.stream_bytes == 64 * MIB
    assert tcp.stream_gbps()[0] == pytest.approx(64 * MIB / 25e-3 / 1e9)
    assert sorted(tcp.allreduce) == [4096, 16 * MIB, 64 * MIB]
    with pytest.raises(KeyError, match="'round_trip' measurement over 'ib'"):
        transport.limit(figures, "ib")
    with pytest.raises(ValueError, match="--json"):
        transport.probe_figures([{"event": "done"}])


def test_probe_table_rows_follow_the_events():
    table = transport.probe_table(transport.probe_figures(_events()))
    assert list(table.columns[:4]) == ["what", "transport", "bytes", "rounds"]
    first = table.iloc[0]
    assert (first["what"], first["transport"], first["time_us"]) == ("round_trip", "tcp", pytest.approx(30.0))


@pytest.mark.parametrize("scale, expected", [(2.0, True), (0.5, False), (1.0, None)])
def test_per_byte_change_verdict_flips_with_the_measurement(scale, expected):
    figures = transport.probe_figures(_events(scale64=scale, horovod_scale=scale))
    horovod = {n: Figure(n * 2e-9 * (scale if n == 64 * MIB else 1.0), n * 1e-11, 3) for n in (16 * MIB, 64 * MIB)}
    parts = transport.path_parts(figures, horovod, "mpi")
    assert set(parts) == {"copy", "add", "first_touch", "without_horovod", "horovod"}
    change = transport.per_byte_change(parts, 16 * MIB, 64 * MIB).set_index("part")
    assert change.loc["copy", "ratio"] == pytest.approx(scale, rel=1e-6)
    for part in ("copy", "without_horovod"):
        got = change.loc[part, "slower_per_byte"]
        assert got is None if expected is None else bool(got) is expected
    with pytest.raises(KeyError, match="both"):
        transport.per_byte_change(parts, 4096, 64 * MIB)
