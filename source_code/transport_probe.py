"""The transport's limit: what two processes can do without Horovod, placed as Horovod's ranks are.

Two ranks (``mpi4py``, started by ``horovodrun --mpi`` or ``mpirun``) measure, in interleaved rounds:

* the round trip of a small message (4 KiB) over MPI (Open MPI's shared memory on one machine) and over
  one TCP loopback connection (what Horovod's Gloo controller uses), ``--pings`` echoes per round;
* the bandwidth of one large message (64 MiB) over each: rank 0 sends, rank 1 receives and answers one byte;
* an all-reduce without Horovod on each transport: ``comm.Allreduce`` of Open MPI, and a two-rank ring over
  the TCP connection in NumPy (``course_lib.training.loopback.ring_allreduce``: exchange halves,
  add the peer's half, exchange the sums straight into place);
* what a rank's memory does to S bytes (each all-reduce size of 1 MiB or more) while the other rank does the
  same: a copy (``np.copyto``), the reduction's arithmetic (``np.add``), and filling a freshly allocated
  buffer (its first touch costs a page fault per 4 KiB page).

Each figure is printed per round (rank 0), as one ``{"event": "transport", ...}`` JSON line with the
per-round values, so that a notebook can put an interval on it (notebooks/05_communication.ipynb).

How to run (2 ranks on this machine; the course's launcher holds the slots and pins each rank to its core)::

    horovodrun -np 2 --mpi python source_code/transport_probe.py --json
    python -c "from course_lib.runner import launch; launch.run_horovod('source_code/transport_probe.py', ['--json'], \
        workers=2, horovodrun=launch.Horovodrun(controller='mpi'))"
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

import numpy as np

from course_lib.training.loopback import connect_pair, recv_exactly
from course_lib.training.loopback import ring_allreduce as tcp_allreduce
from course_lib.training.events import emit
from course_lib.training.flags import HelpFormatter, positive_int

KIB, MIB = 1024, 1024 * 1024


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the flags (a bad flag exits here, before any message is sent)."""
    parser = argparse.ArgumentParser(description="Round trip, bandwidth and all-reduce of two processes "
                                     "over MPI and TCP loopback, without Horovod.", formatter_class=HelpFormatter)
    parser.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds of every measurement")
    parser.add_argument("--pings", type=positive_int, default=500, help="small-message round trips per round")
    parser.add_argument("--small-bytes", type=positive_int, default=4 * KIB, help="small message size")
    parser.add_argument("--large-bytes", type=positive_int, default=64 * MIB,
                        help="large message size (bandwidth, memory); a multiple of 8")
    parser.add_argument("--sizes", default="4096,16777216,67108864",
                        help="comma-separated all-reduce sizes in bytes (multiples of 8)")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: give byte counts separated by commas, e.g. 4096,67108864")
    if not args.sizes or any(s < 8 or s % 8 for s in args.sizes + [args.large_bytes]):
        parser.error("--sizes and --large-bytes must be multiples of 8 bytes (whole float32 pairs), e.g. 4096")
    return args


def ping_pong(send, recv, rank: int, buf: np.ndarray, pings: int) -> float:
    """Median seconds of one round trip: rank 0 sends, rank 1 echoes back."""
    times = np.empty(pings)
    for i in range(pings):
        start = time.perf_counter()
        if rank == 0:
            send(buf)
            recv(buf)
        else:
            recv(buf)
            send(buf)
        times[i] = time.perf_counter() - start
    return float(np.median(times))


def one_way(send, recv, rank: int, buf: np.ndarray, ack: np.ndarray) -> float:
    """Seconds for rank 0 to send ``buf`` to rank 1, until rank 1's one-byte answer is back."""
    start = time.perf_counter()
    if rank == 0:
        send(buf)
        recv(ack)
    else:
        recv(buf)
        send(ack)
    return time.perf_counter() - start


def connect_tcp(comm, rank: int) -> socket.socket:
    """One TCP loopback connection between the two ranks (rank 0 listens, the port travels over MPI)."""
    return connect_pair(rank, lambda port: comm.bcast(port, root=0))


def main(argv: list[str] | None = None) -> int:
    """Run every measurement ``--rounds`` times, interleaved; rank 0 prints them. Returns the exit status."""
    args = parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size != 2:
        if rank == 0:
            print(f"transport_probe.py needs exactly 2 ranks, got {size}: run it with -np 2", file=sys.stderr)
        return 2
    peer = 1 - rank
    sock = connect_tcp(comm, rank)
    small = np.ones(args.small_bytes, np.uint8)
    large = np.ones(args.large_bytes, np.uint8)
    ack = np.zeros(1, np.uint8)
    transports = {
        "mpi": (lambda b: comm.Send(b, dest=peer), lambda b: comm.Recv(b, source=peer)),
        "tcp": (lambda b: sock.sendall(memoryview(b)), lambda b: recv_exactly(sock, memoryview(b))),
    }
    floats = {s: np.full(s // 4, 1.0 + rank, np.float32) for s in args.sizes}
    out = {s: np.empty_like(a) for s, a in floats.items()}
    scratch = np.empty(max(args.sizes) // 8 + 1, np.float32)
    memory = {s: (np.ones(s // 4, np.float32), np.ones(s // 4, np.float32)) for s in args.sizes if s >= MIB}
    found: dict[tuple, list[float]] = {}

    def record(key: tuple, seconds: float) -> None:
        found.setdefault(key, []).append(float(comm.allreduce(seconds, op=MPI.MAX)))   # the slower rank counts

    def timed(work) -> float:
        comm.Barrier()                                    # both ranks start together
        start = time.perf_counter()
        work()
        return time.perf_counter() - start

    for r in range(args.rounds):
        order = list(transports) if r % 2 == 0 else list(transports)[::-1]   # ABBA: drift moves both alike
        for name in order:
            send, recv = transports[name]
            comm.Barrier()
            ping_pong(send, recv, rank, small, 20)        # warm-up
            record(("round_trip", name, args.small_bytes), ping_pong(send, recv, rank, small, args.pings))
            one_way(send, recv, rank, large, ack)          # warm-up
            comm.Barrier()
            record(("one_way", name, args.large_bytes), min(one_way(send, recv, rank, large, ack) for _ in range(3)))
            for s in args.sizes:
                if name == "mpi":
                    work = lambda s=s: comm.Allreduce(floats[s], out[s], op=MPI.SUM)   # noqa: E731
                else:
                    work = lambda s=s: tcp_allreduce(sock, rank, floats[s], scratch)   # noqa: E731
                work()                                     # warm-up
                record(("allreduce", name, s), float(np.median([timed(work) for _ in range(3)])))
        for s, (a, b) in memory.items():                     # both ranks at once, as in an all-reduce
            for what, work in (("copy", lambda a=a, b=b: np.copyto(a, b)),
                               ("add", lambda a=a, b=b: np.add(a, b, out=a)),
                               ("fresh_fill", lambda a=a: np.empty_like(a).fill(1.0))):
                work()
                record((what, "memory", s), float(np.median([timed(work) for _ in range(3)])))
    sock.close()
    if rank == 0:
        for (what, transport, nbytes), values in found.items():
            median = float(np.median(values))
            rate = nbytes / median / 1e9
            print(f"{what:>11} {transport:>6} {nbytes:>10} B: median of {len(values)} rounds "
                  f"{median * 1e6:10.1f} us ({rate:.2f} GB/s)", flush=True)
            emit("transport", args.json, what=what, transport=transport, bytes=nbytes, seconds=values)
        emit("done", args.json, rounds=args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
