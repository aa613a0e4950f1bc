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
workers, compression); bandwidths are in GB/s (10^9 bytes per second). Horovod's own settings
(HOROVOD_CYCLE_TIME, HOROVOD_FUSION_THRESHOLD) are read from the environment as usual and
reported in the ``config`` line. ``course_lib.lessons.allreduce_model`` fits the alpha-beta
model to these lines (notebooks/05_communication.ipynb).
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
    parser.add_argument("--json", action="store_true",
                        help="print JSON lines (config, one allreduce per size, done)")
    args = parser.parse_args(argv)
    if args.factor < 2:
        parser.error(f"--factor {args.factor} must be at least 2, e.g. --factor 4")
    if args.min_bytes > args.max_bytes:
        parser.error(f"--min-bytes ({args.min_bytes}) must not exceed --max-bytes "
                     f"({args.max_bytes}); swap them or lower --min-bytes")
    args.sizes = message_sizes(args.min_bytes, args.max_bytes, args.factor)
    return args


def controller_name() -> str:
    """``"gloo"`` or ``"mpi"``: which controller Horovod runs this job with."""
    import horovod.tensorflow as hvd

    if hvd.gloo_enabled() and not hvd.mpi_enabled():
        return "gloo"
    if hvd.mpi_enabled():
        return "mpi"
    return "none"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import horovod.tensorflow as hvd
    import numpy as np
    import tensorflow as tf

    hvd.init()  # Horovod: join the worker group (size 1 without horovodrun)
    tf.config.threading.set_intra_op_parallelism_threads(1)  # the tensors are made once; keep
    tf.config.threading.set_inter_op_parallelism_threads(1)  # the cores for Horovod's threads
    rank, workers = hvd.rank(), hvd.size()
    controller = controller_name()
    # Horovod: fp16 compression casts the tensor to float16 before the all-reduce and back after.
    compression = hvd.Compression.fp16 if args.compression == "fp16" else hvd.Compression.none
    wire_factor = 0.5 if args.compression == "fp16" else 1.0
    if rank == 0:
        print(f"{workers} worker(s), controller {controller}, compression {args.compression}, "
              f"{args.repeats} repeats after {args.warmup} warm-up calls per size", flush=True)
        emit("config", args.json, script="allreduce_bench.py", workers=workers,
             controller=controller, compression=args.compression, repeats=args.repeats,
             warmup=args.warmup, sizes=args.sizes,
             cycle_time_ms=os.environ.get("HOROVOD_CYCLE_TIME"),
             fusion_threshold=os.environ.get("HOROVOD_FUSION_THRESHOLD"))
        print(f"{'bytes':>12} {'median ms':>10} {'q1 ms':>9} {'q3 ms':>9} {'algbw GB/s':>11} "
              f"{'busbw GB/s':>11}", flush=True)
    ring = 2 * (workers - 1) / workers  # Horovod: bytes a ring all-reduce moves per byte, per link
    sync = tf.zeros([1], tf.float32)
    for size in args.sizes:
        elements = size // 4
        tensor = tf.fill([elements], tf.constant(1.0 + rank, tf.float32))
        name = f"bench_{size}"  # Horovod: one name per size, so the response cache reuses it
        for _ in range(args.warmup):
            hvd.allreduce(tensor, op=hvd.Sum, name=name, compression=compression)
        times = np.zeros(args.repeats)
        for i in range(args.repeats):
            hvd.allreduce(sync, op=hvd.Sum, name="bench_sync")  # Horovod: start together
            start = time.perf_counter()
            hvd.allreduce(tensor, op=hvd.Sum, name=name, compression=compression)  # Horovod
            times[i] = time.perf_counter() - start
        # Horovod: a call lasts as long as its slowest worker: take the maximum over ranks.
        slowest = hvd.allreduce(tf.constant(times), op=hvd.Max, name=f"bench_times_{size}").numpy()
        q1, median, q3 = (float(v) for v in np.percentile(slowest, [25, 50, 75]))
        algbw = size / median / 1e9
        busbw = algbw * ring
        if rank == 0:
            print(f"{size:>12} {median * 1e3:>10.3f} {q1 * 1e3:>9.3f} {q3 * 1e3:>9.3f} "
                  f"{algbw:>11.3f} {busbw:>11.3f}", flush=True)
            emit("allreduce", args.json, bytes=size, elements=elements,
                 wire_bytes=int(size * wire_factor), repeats=args.repeats, median_s=median,
                 q1_s=q1, q3_s=q3, algbw_gbps=algbw, busbw_gbps=busbw, controller=controller,
                 workers=workers, compression=args.compression)
    if rank == 0:
        emit("done", args.json, sizes=len(args.sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
