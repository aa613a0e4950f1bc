"""Two ranks' bytes without Horovod: a TCP pair, an exchange in both directions at once, a two-rank ring.

The scripts of notebook 05 measure what a 2-rank all-reduce can reach on this machine with these pieces:
``source_code/transport_probe.py`` (the transport's limit) and ``source_code/allreduce_bench.py --bound``
(the reachable bound, in the same rounds as Horovod's all-reduce). A two-rank ring all-reduce of S bytes is two
exchanges of S/2 bytes each way at once (reduce-scatter, then all-gather) and one add of S/2 bytes on each rank;
:func:`ring_allreduce` does exactly that, receiving the all-gather's half straight into place (no extra copy).

Nothing here imports TensorFlow or MPI; the MPI side of an exchange is ``comm.Sendrecv`` (the scripts call it).

Introduced in notebooks/05_communication.ipynb (its scripts, transport_probe.py and allreduce_bench.py, import it).
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Callable

import numpy as np

__all__ = ["SOCKET_BUFFER", "recv_exactly", "connect_pair", "exchange", "ring_allreduce", "runqueue_wait_s"]

#: Messages up to this size fit the socket's kernel buffer: sent before the receive, no sending thread needed.
SOCKET_BUFFER = 64 * 1024


def recv_exactly(sock: socket.socket, view: memoryview) -> None:
    """Receive until ``view`` is full (TCP delivers a stream in pieces).

    Raises:
        ConnectionError: The peer closed the connection first.
    """
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("the peer closed the connection")
        got += n


def connect_pair(rank: int, share_port: Callable[[int | None], int]) -> socket.socket:
    """One TCP loopback connection between rank 0 and rank 1, ``TCP_NODELAY`` set.

    Args:
        rank: This rank (0 listens, 1 connects).
        share_port: Sends rank 0's port to rank 1: called with the port on rank 0 and ``None`` on rank 1, it
            returns the port on both (``comm.bcast`` of MPI, ``hvd.broadcast_object`` of Horovod).
    """
    if rank == 0:
        server = socket.create_server(("127.0.0.1", 0))
        share_port(server.getsockname()[1])
        sock, _ = server.accept()
        server.close()
    else:
        sock = socket.create_connection(("127.0.0.1", share_port(None)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # small messages go out at once
    return sock


def exchange(sock: socket.socket, outgoing: np.ndarray, incoming: np.ndarray) -> None:
    """Send ``outgoing`` to the peer while receiving ``incoming`` from it: both directions at once."""
    out = memoryview(outgoing).cast("B")
    into = memoryview(incoming).cast("B")
    if len(out) <= SOCKET_BUFFER:                      # fits the kernel's buffer: send, then receive
        sock.sendall(out)
        recv_exactly(sock, into)
        return
    sender = threading.Thread(target=sock.sendall, args=(out,))
    sender.start()
    recv_exactly(sock, into)
    sender.join()


def ring_allreduce(sock: socket.socket, rank: int, data: np.ndarray, scratch: np.ndarray) -> None:
    """Sum ``data`` (float32) with the peer's over one TCP connection: a two-rank ring, in place.

    Reduce-scatter: send the half the peer owns, receive the peer's copy of my half into ``scratch``, add it.
    All-gather: send my summed half, receive the peer's summed half straight into place. Each rank sends and
    receives S bytes and adds S/2: the work of the reachable bound, nothing more.
    """
    half = len(data) // 2
    mine, theirs = (slice(0, half), slice(half, None)) if rank == 0 else (slice(half, None), slice(0, half))
    target = scratch[: len(data[mine])]
    exchange(sock, data[theirs], target)
    np.add(data[mine], target, out=data[mine])            # the reduction's arithmetic
    exchange(sock, data[mine], data[theirs])              # the peer's sums land where they belong


def runqueue_wait_s() -> float:
    """Seconds this process's threads have waited for a core so far (Linux: ``/proc/self/task/*/schedstat``,
    its second field, summed over the threads); NaN where the kernel does not report it."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return float("nan")
    found = False
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
                found = True
        except (OSError, IndexError, ValueError):
            continue                                      # a thread that ended meanwhile
    return total / 1e9 if found else float("nan")
