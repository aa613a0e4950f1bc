"""Tests of course_lib.training.loopback: the two-rank ring over one TCP connection, and the run-queue reading
(notebook 05's bound and the transport probe use them)."""

from __future__ import annotations

import math
import socket
import threading

import numpy as np

from course_lib.training import loopback


def test_the_ring_sums_both_ranks_in_place_over_a_real_socket() -> None:
    """Both directions at once, larger than the kernel's buffer: each rank ends with the sum, nothing else."""
    a, b = socket.socketpair()
    n = 2 * loopback.SOCKET_BUFFER  # floats: 8x the buffer in bytes, so the threaded exchange path runs
    data = [np.arange(n, dtype=np.float32), np.full(n, 2.0, dtype=np.float32)]
    expected = data[0] + data[1]
    scratch = [np.empty(n, dtype=np.float32) for _ in range(2)]
    peer = threading.Thread(target=loopback.ring_allreduce, args=(b, 1, data[1], scratch[1]))
    peer.start()
    loopback.ring_allreduce(a, 0, data[0], scratch[0])
    peer.join(timeout=30)
    a.close()
    b.close()
    assert not peer.is_alive() and np.array_equal(data[0], expected) and np.array_equal(data[1], expected)


def test_the_run_queue_wait_is_seconds_or_nan() -> None:
    first = loopback.runqueue_wait_s()
    sum(range(200_000))
    second = loopback.runqueue_wait_s()
    assert (math.isnan(first) and math.isnan(second)) or 0.0 <= first <= second
