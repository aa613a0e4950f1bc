"""Tests of source_code/transport_probe.py: its flags, its ring all-reduce, and a real 2-rank run (MPI)."""

from __future__ import annotations

import importlib.util
import socket
import threading
from pathlib import Path

import numpy as np
import psutil
import pytest

from course_lib.lessons.communication import transport
from course_lib.runner.launch import Horovodrun, run_horovod
from flag_runs import run_flag_sets

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "source_code" / "transport_probe.py"


def _load():
    spec = importlib.util.spec_from_file_location("transport_probe", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BAD_FLAGS = [
    (["--rounds", "0"], "integer >= 1"),
    (["--sizes", "4096,abc"], "separated by commas"),
    (["--sizes", "4100"], "multiples of 8"),
    (["--large-bytes", "12"], "multiples of 8"),
]


def test_bad_flags_fail_before_any_message():
    runs = run_flag_sets(PROBE, [f for f, _ in BAD_FLAGS], cwd=ROOT)
    for run, (_, message) in zip(runs["runs"], BAD_FLAGS):
        assert run["code"] == 2 and message in run["out"] and "Traceback" not in run["out"]
    assert _load().parse_args([]).sizes == [4096, 16 * 2 ** 20, 64 * 2 ** 20]


@pytest.mark.parametrize("elements", [256, 2 ** 20])      # below and above the socket buffer: both paths
def test_the_numpy_ring_sums_both_ranks_in_place(elements):
    probe = _load()
    a_sock, b_sock = socket.socketpair()
    a = np.arange(elements, dtype=np.float32)
    b = np.full(elements, 2.0, np.float32)
    want = a + b
    scratch = [np.empty(elements // 2 + 1, np.float32) for _ in range(2)]
    peer = threading.Thread(target=probe.tcp_allreduce, args=(b_sock, 1, b, scratch[1]))
    peer.start()
    probe.tcp_allreduce(a_sock, 0, a, scratch[0])
    peer.join()
    a_sock.close()
    b_sock.close()
    assert np.array_equal(a, want) and np.array_equal(b, want)


@pytest.mark.horovod
def test_two_ranks_measure_every_figure_and_leave_nothing():
    result = run_horovod(PROBE, ["--json", "--rounds", "2", "--pings", "20", "--large-bytes", str(2 ** 20),
                                    "--sizes", f"4096,{2 ** 20}", "--small-bytes", "4096"], workers=2,
                         horovodrun=Horovodrun(controller="mpi"), show="none", timeout=240, cwd=ROOT)
    events = [e for rank, e in result.events if rank == 0]
    figures = transport.probe_figures(events)
    whats = {(w, t) for w, t, _ in figures}
    assert whats == {("round_trip", "mpi"), ("one_way", "mpi"), ("allreduce", "mpi"), ("round_trip", "tcp"),
                     ("one_way", "tcp"), ("allreduce", "tcp"), ("copy", "memory"), ("add", "memory"),
                     ("fresh_fill", "memory")}
    assert all(f.rounds == 2 and f.seconds > 0 for f in figures.values())
    assert ("copy", "memory", 4096) not in figures            # memory is measured from 1 MiB up
    assert not [e for rank, e in result.events if rank != 0]   # rank 0 alone prints
    alive = [p for p in result.pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == []
