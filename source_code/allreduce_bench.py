"""All-reduce micro-benchmark: how long ``hvd.allreduce`` takes for float32 tensors of each size.

Every worker all-reduces (sums) a float32 tensor of S bytes, for S from 4 KiB to 64 MiB in powers
of 4, after a few warm-up calls; the time of one call is the slowest worker's, and rank 0 reports
the median over the repeats and the bandwidths defined by NVIDIA's nccl-tests
(doc/PERFORMANCE.md): algorithm bandwidth algbw = S / t and bus bandwidth
busbw = algbw x 2 (N - 1) / N, the rate each link of a ring actually carries.

How to run (2 workers on this machine, Gloo or MPI)::

    horovodrun -np 2 --gloo python source_code/allreduce_bench.py --repeats 10
    horovodrun -np 2 --mpi python source_code/allreduce_bench.py --compression fp16 --json

With ``--json``, rank 0 prints one ``{"event": "allreduce", ...}`` line per size (keys: bytes,
elements, wire_bytes, repeats, median_s, q1_s, q3_s, algbw_gbps, busbw_gbps, controller,
workers, compression, and per round: round_medians_s, round_minflt (minor page faults per call, the
larger rank's), round_runqueue_s (seconds per call that the larger rank's threads waited for a core, from
``/proc/self/task/*/schedstat``)); bandwidths are in GB/s (10^9 bytes per second).

``--bound`` (2 workers) also measures, in every round after the sizes, the reachable bound of a 2-rank
all-reduce at the largest size S on the controller's own transport (a TCP loopback connection for Gloo,
``mpi4py`` over Open MPI's shared memory for MPI): one exchange of S/2 bytes each way at once, the add of S/2,
copies of S into warm and into freshly allocated memory, and the same all-reduce without Horovod (a NumPy ring
over TCP, or ``MPI_Allreduce``); its order reversed every other round. Rank 0 prints one ``{"event": "bound",
...}`` line with one value per round of each (``course_lib.lessons.communication.bound`` reads it):

    horovodrun -np 2 --mpi python source_code/allreduce_bench.py --rounds 5 --bound --json Horovod's own settings
(HOROVOD_CYCLE_TIME, HOROVOD_FUSION_THRESHOLD) are read from the environment as usual and
reported in the ``config`` line. ``course_lib.lessons.communication.allreduce_model`` fits the alpha-beta
model to these lines (notebooks/05_communication.ipynb).

``--cycle-times 5,25`` measures at several ``HOROVOD_CYCLE_TIME`` values in one launch, interleaved
(Gloo only): every round restarts Horovod once per cycle time (``hvd.shutdown()``, a new
``HOROVOD_CYCLE_TIME``, ``hvd.init()``; Horovod reads the variable at ``init``), the order of the
cycle times reversed every other round, so that a change of the machine's load moves every cycle
time alike. Each ``allreduce`` line carries its ``cycle_time_ms``; the repeats of a size are
pooled over the ``--rounds``, and ``round_medians_s`` holds each round's median (a paired difference
per round puts an interval on what changed). ``--dispatch eager,function`` also times every call both
ways, interleaved the same way: ``hvd.allreduce`` called eagerly from Python, and the same call traced
once into a ``tf.function`` (TensorFlow then runs the op without Python's per-op dispatch). Launch it through the course (``launch.run_horovod``, or
``python -m course_lib.runner.horovodrun``): Horovod 0.28.1's own ``horovodrun`` can hand a restarting
rank a stale address on a loaded machine (``gloo::IoException ... Connection refused``), a server bug
that ``course_lib.runner.gloo_rendezvous`` fixes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from course_lib.training.events import emit
from course_lib.training.flags import HelpFormatter, non_negative_int, positive_int

KIB = 1024
MIB = 1024 * KIB


def bytes_flag(text: str) -> int:
    """argparse type: a byte count >= 4 that is a multiple of 4 (whole float32 elements)."""
    value = positive_int(text)
    if value < 4 or value % 4:
        raise argparse.ArgumentTypeError(
            f"expected a number of bytes that is a multiple of 4 (float32 elements), got {text!r}")
    return value


def message_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """The sizes measured: ``min_bytes``, x ``factor``, ... up to ``max_bytes`` (inclusive)."""
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def cycle_times_flag(text: str) -> list[float]:
    """argparse type: comma-separated cycle times in ms, each > 0, no repeats (``"5,25"``)."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected cycle times in ms separated by commas, e.g. 5,25; got {text!r}")
    if not values or any(v <= 0 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected distinct cycle times > 0 ms, e.g. 5,25; got {text!r}")
    return values


DISPATCHES = ("eager", "function")


def dispatch_flag(text: str) -> list[str]:
    """argparse type: comma-separated ways to call the all-reduce, of ``eager`` and ``function``, no repeats."""
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values or any(v not in DISPATCHES for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected eager, function or eager,function; got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the flags; every bad flag exits here, before Horovod starts."""
    parser = argparse.ArgumentParser(
        description="Time hvd.allreduce of float32 tensors of growing size (nccl-tests style).",
        epilog="example: horovodrun -np 2 --gloo python source_code/allreduce_bench.py --json",
        formatter_class=HelpFormatter)
    parser.add_argument("--min-bytes", type=bytes_flag, default=4 * KIB,
                        help="smallest message in bytes (a multiple of 4)")
    parser.add_argument("--max-bytes", type=bytes_flag, default=64 * MIB,
                        help="largest message in bytes (a multiple of 4)")
    parser.add_argument("--factor", type=positive_int, default=4,
                        help="each size is this many times the previous one (>= 2)")
    parser.add_argument("--repeats", type=positive_int, default=10,
                        help="timed all-reduce calls per size (the median is reported)")
    parser.add_argument("--warmup", type=non_negative_int, default=3,
                        help="untimed calls per size first (buffers, Horovod's response cache)")
    parser.add_argument("--compression", choices=("none", "fp16"), default="none",
                        help="fp16: hvd.Compression.fp16 (the tensor travels as float16, half "
                        "the bytes; bandwidths still count the float32 size)")
    parser.add_argument("--cycle-times", type=cycle_times_flag, default=None,
                        help="HOROVOD_CYCLE_TIME values (ms, comma-separated) measured interleaved in this one "
                        "launch, Horovod restarted for each (Gloo only); default: the environment's")
    parser.add_argument("--dispatch", type=dispatch_flag, default=["eager"],
                        help="how each call is made, interleaved: eager (hvd.allreduce from Python) and/or "
                        "function (the same call inside a tf.function)")
    parser.add_argument("--rounds", type=positive_int, default=1,
                        help="rounds over the sizes (and the --cycle-times), --repeats timed calls per size each; "
                        "the calls of every round are pooled")
    parser.add_argument("--bound", action="store_true",
                        help="also measure, in every round, the reachable bound of a 2-rank all-reduce at the largest "
                        "size (two exchanges of S/2 bytes each way at once, the add of S/2, copies of S) and the "
                        "same all-reduce without Horovod, on the controller's own transport (2 workers only)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON lines (config, one allreduce per size, bound, done)")
    args = parser.parse_args(argv)
    if args.factor < 2:
        parser.error(f"--factor {args.factor} must be at least 2, e.g. --factor 4")
    if args.min_bytes > args.max_bytes:
        parser.error(f"--min-bytes ({args.min_bytes}) must not exceed --max-bytes "
                     f"({args.max_bytes}); swap them or lower --min-bytes")
    args.sizes = message_sizes(args.min_bytes, args.max_bytes, args.factor)
    if args.bound and (args.cycle_times and len(args.cycle_times) > 1 or args.max_bytes % 8):
        parser.error("--bound measures one start of Horovod at a --max-bytes that halves into whole float32 "
                     "elements: give at most one --cycle-times value and a --max-bytes that is a multiple of 8")
    return args


def controller_name() -> str:
    """``"gloo"`` or ``"mpi"``: which controller Horovod runs this job with."""
    import horovod.tensorflow as hvd

    if hvd.gloo_enabled() and not hvd.mpi_enabled():
        return "gloo"
    if hvd.mpi_enabled():
        return "mpi"
    return "none"


def time_sizes(hvd, tf, np, sizes: list[int], repeats: int, warmup: int, compression, tag: str,
               dispatch: str = "eager") -> tuple[dict[int, list], dict[int, tuple[float, float]]]:
    """Per size: the slowest worker's time of each of ``repeats`` timed all-reduce calls (seconds), and per size
    ``(minor page faults, seconds the threads waited for a core)`` per call, the larger rank's of each."""
    import resource

    from course_lib.training.loopback import runqueue_wait_s

    sync = tf.zeros([1], tf.float32)
    found, costs = {}, {}
    for size in sizes:
        tensor = tf.fill([size // 4], tf.constant(1.0 + hvd.rank(), tf.float32))
        name = f"bench_{size}_{dispatch}"  # Horovod: one name per size, so the response cache reuses it

        def call(t, name=name):
            return hvd.allreduce(t, op=hvd.Sum, name=name, compression=compression)  # Horovod

        if dispatch == "function":
            call = tf.function(call)  # traced once (first warm-up call); later calls skip Python's op dispatch
        for _ in range(max(warmup, 1 if dispatch == "function" else 0)):
            call(tensor)
        times, faults = np.zeros(repeats), np.zeros(repeats)
        waited = 0.0
        for i in range(repeats):
            hvd.allreduce(sync, op=hvd.Sum, name="bench_sync")  # Horovod: start together
            before, queued = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, runqueue_wait_s()
            start = time.perf_counter()
            call(tensor)
            times[i] = time.perf_counter() - start
            waited += runqueue_wait_s() - queued                 # every thread of this rank, Horovod's included
            faults[i] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        # Horovod: a call lasts as long as its slowest worker: take the maximum over ranks.
        found[size] = list(hvd.allreduce(tf.constant(times), op=hvd.Max, name=f"bench_times_{tag}{size}").numpy())
        per_call = tf.constant([float(np.median(faults)), waited / repeats], tf.float64)
        costs[size] = tuple(float(v) for v in hvd.allreduce(per_call, op=hvd.Max, name=f"bench_costs_{tag}{size}"))
    return found, costs


def bound_round(hvd, tf, np, size: int, repeats: int, peer, tag: str, reverse: bool) -> dict[str, float]:
    """One round of the reachable bound at ``size`` bytes, and the same all-reduce without Horovod.

    Each measurement is ``repeats`` calls with both ranks started together; a call's time is the slower rank's,
    the round keeps the median. The order of the measurements is reversed when ``reverse`` (A B C D, D C B A).
    """
    half = size // 8                                          # float32 elements of S/2 bytes
    data = np.full(size // 4, 1.0 + hvd.rank(), np.float32)
    source, warm = np.ones(size // 4, np.float32), np.empty(size // 4, np.float32)
    mine, theirs, into = np.ones(half, np.float32), np.ones(half, np.float32), np.empty(half, np.float32)
    work = {
        "exchange_s": lambda: peer.exchange(mine, into),                  # S/2 each way, both at once
        "add_s": lambda: np.add(mine, theirs, out=mine),                  # the reduction of S/2
        "copy_s": lambda: np.copyto(warm, source),                        # S into memory touched before
        "copy_fresh_s": lambda: np.copyto(np.empty_like(source), source),  # S into freshly allocated memory
        "bare_s": lambda: peer.allreduce(data),                           # the all-reduce without Horovod
    }
    names = list(work)[::-1] if reverse else list(work)
    medians = []
    for name in names:
        work[name]()                                          # warm-up
        times = []
        for _ in range(repeats):
            peer.barrier()
            start = time.perf_counter()
            work[name]()
            times.append(time.perf_counter() - start)
        medians.append(float(np.median(times)))
    slowest = hvd.allreduce(tf.constant(medians, tf.float64), op=hvd.Max, name=f"bench_bound_{tag}")
    return dict(zip(names, (float(v) for v in slowest)))


class TcpPeer:
    """The other rank over one TCP loopback connection: what Horovod's Gloo controller moves its bytes over."""

    transport = "tcp"

    def __init__(self, hvd, np, size: int) -> None:
        from course_lib.training.loopback import connect_pair

        self.rank, self.np = hvd.rank(), np
        self.sock = connect_pair(self.rank, lambda port: hvd.broadcast_object(port, root_rank=0, name="bound_port"))
        self.scratch = np.empty(size // 8 + 1, np.float32)
        self.token = np.zeros(1, np.uint8)

    def exchange(self, outgoing, incoming) -> None:
        from course_lib.training.loopback import exchange

        exchange(self.sock, outgoing, incoming)

    def allreduce(self, data) -> None:
        from course_lib.training.loopback import ring_allreduce

        ring_allreduce(self.sock, self.rank, data, self.scratch)

    def barrier(self) -> None:
        self.exchange(self.token, self.token)

    def close(self) -> None:
        self.sock.close()


class MpiPeer:
    """The other rank over MPI (Open MPI's shared memory on one machine): Horovod's MPI controller's transport."""

    transport = "mpi"

    def __init__(self, hvd, np, size: int) -> None:
        from mpi4py import MPI  # Horovod initialised MPI with threads; mpi4py joins it

        self.comm, self.MPI = MPI.COMM_WORLD, MPI
        self.peer = 1 - self.comm.Get_rank()
        self.out = np.empty(size // 4, np.float32)

    def exchange(self, outgoing, incoming) -> None:
        self.comm.Sendrecv(outgoing, dest=self.peer, recvbuf=incoming, source=self.peer)

    def allreduce(self, data) -> None:
        self.comm.Allreduce(data, self.out, op=self.MPI.SUM)

    def barrier(self) -> None:
        self.comm.Barrier()

    def close(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import horovod.tensorflow as hvd
    import numpy as np
    import tensorflow as tf

    cycles = args.cycle_times or [None]  # None: the environment's HOROVOD_CYCLE_TIME, one start of Horovod
    if cycles[0] is not None:
        os.environ["HOROVOD_CYCLE_TIME"] = f"{cycles[0]:g}"
    hvd.init()  # Horovod: join the worker group (size 1 without horovodrun)
    tf.config.threading.set_intra_op_parallelism_threads(1)  # the tensors are made once; keep
    tf.config.threading.set_inter_op_parallelism_threads(1)  # the cores for Horovod's threads
    rank, workers = hvd.rank(), hvd.size()
    controller = controller_name()
    if len(cycles) > 1 and controller != "gloo":
        if rank == 0:
            print(f"--cycle-times restarts Horovod, which {controller} cannot do: run it with --gloo", file=sys.stderr)
        return 2
    if args.bound and workers != 2:
        if rank == 0:
            print(f"--bound measures a 2-rank all-reduce, this run has {workers}: run it with -np 2", file=sys.stderr)
        return 2
    peer = (MpiPeer if controller == "mpi" else TcpPeer)(hvd, np, args.sizes[-1]) if args.bound else None
    bounds: list[dict[str, float]] = []
    # Horovod: fp16 compression casts the tensor to float16 before the all-reduce and back after.
    compression = hvd.Compression.fp16 if args.compression == "fp16" else hvd.Compression.none
    wire_factor = 0.5 if args.compression == "fp16" else 1.0
    rounds = args.rounds
    if rank == 0:
        print(f"{workers} worker(s), controller {controller}, compression {args.compression}, "
              f"{args.repeats} repeats after {args.warmup} warm-up calls per size"
              + (f", cycle times {cycles} ms interleaved" if len(cycles) > 1 else "")
              + (f", dispatch {' and '.join(args.dispatch)} interleaved" if len(args.dispatch) > 1 else "")
              + f", {rounds} round(s)",
              flush=True)
        emit("config", args.json, script="allreduce_bench.py", workers=workers,
             controller=controller, compression=args.compression, repeats=args.repeats * rounds,
             warmup=args.warmup, sizes=args.sizes,
             cycle_time_ms=os.environ.get("HOROVOD_CYCLE_TIME") if len(cycles) == 1 else args.cycle_times,
             fusion_threshold=os.environ.get("HOROVOD_FUSION_THRESHOLD"))
    dispatches = args.dispatch
    pooled: dict[tuple, list] = {(c, d, size): [] for c in cycles for d in dispatches for size in args.sizes}
    per_round: dict[tuple, list] = {key: [] for key in pooled}
    round_costs: dict[tuple, list] = {key: [] for key in pooled}
    for r in range(rounds):
        for i, cycle in enumerate(cycles if r % 2 == 0 else cycles[::-1]):   # ABBA: a drift moves both alike
            if len(cycles) > 1 and (r, i) != (0, 0):
                hvd.shutdown()  # Horovod: stop, then start again with the next cycle time (read at init)
                os.environ["HOROVOD_CYCLE_TIME"] = f"{cycle:g}"
                hvd.init()
            for j, dispatch in enumerate(dispatches if (r + i) % 2 == 0 else dispatches[::-1]):
                found, costs = time_sizes(hvd, tf, np, args.sizes, args.repeats, args.warmup, compression,
                                          tag=f"{r}_{i}_{j}_", dispatch=dispatch)
                for size, times in found.items():
                    pooled[(cycle, dispatch, size)] += times
                    per_round[(cycle, dispatch, size)].append(float(np.median(times)))
                    round_costs[(cycle, dispatch, size)].append(costs[size])
        if peer is not None:
            bounds.append(bound_round(hvd, tf, np, args.sizes[-1], args.repeats, peer, tag=str(r), reverse=r % 2 == 1))
    if peer is not None:
        peer.close()
    ring = 2 * (workers - 1) / workers  # Horovod: bytes a ring all-reduce moves per byte, per link
    if rank == 0:
        print(f"{'cycle ms':>8} {'dispatch':>8} {'bytes':>12} {'median ms':>10} {'q1 ms':>9} {'q3 ms':>9} "
              f"{'algbw GB/s':>11} {'busbw GB/s':>11}", flush=True)
        for (cycle, dispatch, size), times in pooled.items():
            q1, median, q3 = (float(v) for v in np.percentile(times, [25, 50, 75]))
            algbw = size / median / 1e9
            busbw = algbw * ring
            cycle_ms = cycle if cycle is not None else os.environ.get("HOROVOD_CYCLE_TIME")
            print(f"{cycle_ms or '-':>8} {dispatch:>8} {size:>12} {median * 1e3:>10.3f} {q1 * 1e3:>9.3f} "
                  f"{q3 * 1e3:>9.3f} {algbw:>11.3f} {busbw:>11.3f}", flush=True)
            emit("allreduce", args.json, bytes=size, elements=size // 4,
                 wire_bytes=int(size * wire_factor), repeats=len(times), median_s=median,
                 q1_s=q1, q3_s=q3, algbw_gbps=algbw, busbw_gbps=busbw, controller=controller,
                 workers=workers, compression=args.compression,
                 cycle_time_ms=float(cycle_ms) if cycle_ms else None, dispatch=dispatch,
                 round_medians_s=per_round[(cycle, dispatch, size)],
                 round_minflt=[c[0] for c in round_costs[(cycle, dispatch, size)]],
                 round_runqueue_s=[c[1] for c in round_costs[(cycle, dispatch, size)]])
        if peer is not None:
            for name in bounds[0]:
                print(f"bound at {args.sizes[-1]} B, {name}: per round " + ", ".join(
                    f"{b[name] * 1e3:.2f}" for b in bounds) + " ms", flush=True)
            emit("bound", args.json, bytes=args.sizes[-1], controller=controller, transport=peer.transport,
                 workers=workers, **{name: [b[name] for b in bounds] for name in bounds[0]})
        emit("done", args.json, sizes=len(args.sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
