"""Probe of the "factor-of-two mode": consecutive ``fit(40 steps)`` calls in one process, each
recorded with the CPU clock (course_lib.training.cpuclock).

The course CNN, batch 128, real Fashion-MNIST (``--data`` .npz from ``in_process.py prepare``),
a ``--warmup-steps`` fit first, then ``--calls`` fits of ``--steps`` steps. Per call one JSON line
``{"event": "probe_call", "wall_s", "cpu_per_wall", "idle_fraction", "steal_fraction",
"procs_running", "cpus", "disturbed", ...}``; at the end ``{"event": "probe_summary", ...}`` with
TensorFlow's intra/inter-op settings. Threading variants: ``--intra``/``--inter`` (explicit pool
sizes via ``tf.config.threading``), ``--affinity 0,1`` (``os.sched_setaffinity`` before
TensorFlow starts). ``--no-autotune`` turns tf.data's autotuning off for the dataset.

Each call also records ``steps_s`` (from ``fit``'s start to ``on_train_end``, i.e. the 40 steps)
and ``teardown_s`` (from ``on_train_end`` until ``fit`` returns: the tf.data iterator's teardown),
which is where the slow mode's extra time goes (benchmarks/README.md, "The factor-of-two mode").

How to run:
    .venv/bin/python benchmarks/workloads/in_process.py prepare --out /tmp/fm.npz
    .venv/bin/python benchmarks/workloads/probe_two_modes.py --data /tmp/fm.npz --calls 12
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from course_lib.training.flags import positive_int  # noqa: E402  (after the path set-up)


def cpu_list(text: str) -> set[int]:
    """argparse type: comma-separated CPU numbers, e.g. ``0,1``."""
    try:
        cpus = {int(p) for p in text.split(",") if p.strip()}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"CPU list like 0,1 expected, got {text!r}") from exc
    if not cpus or min(cpus) < 0:
        raise argparse.ArgumentTypeError(f"CPU list like 0,1 expected, got {text!r}")
    return cpus


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the flags (bad flags exit before TensorFlow starts)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", required=True, help=".npz with x_train, y_train")
    parser.add_argument("--label", default="default", help="name of this variant in the output")
    parser.add_argument("--calls", type=positive_int, default=12)
    parser.add_argument("--steps", type=positive_int, default=40)
    parser.add_argument("--warmup-steps", type=positive_int, default=5)
    parser.add_argument("--batch", type=positive_int, default=128)
    parser.add_argument("--intra", type=positive_int, default=None, help="intra-op threads")
    parser.add_argument("--inter", type=positive_int, default=None, help="inter-op threads")
    parser.add_argument("--affinity", type=cpu_list, default=None,
                        help="pin the process (all its threads) to these CPUs, e.g. 0,1")
    parser.add_argument("--no-autotune", action="store_true",
                        help="tf.data.Options().autotune.enabled = False for the dataset")
    parser.add_argument("--sample-every", type=float, default=0.2,
                        help="seconds between samples of the threads' CPUs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the probe; prints JSON lines; returns the exit status."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.affinity is not None:
        os.sched_setaffinity(0, args.affinity)
    import numpy as np

    from benchmarks.workloads.in_process import fit_steps_and_teardown
    from course_lib.training import models, pipeline
    from course_lib.training.cpuclock import CpuClock

    from course_lib.training.keras2 import keras
    import tensorflow as tf

    if args.intra is not None:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra)
    if args.inter is not None:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter)
    arrays = np.load(args.data)
    ds = pipeline.make_dataset(arrays["x_train"], arrays["y_train"], batch_size=args.batch,
                               training=True, seed=0, cache=False).repeat()
    if args.no_autotune:
        options = tf.data.Options()
        options.autotune.enabled = False
        ds = ds.with_options(options)

    model = models.compile_model(models.build_model(seed=0), keras.optimizers.Adam(1e-3))
    model.fit(ds, epochs=1, steps_per_epoch=args.warmup_steps, verbose=0)
    walls, slow = [], 0
    for call in range(args.calls):
        with CpuClock(sample_every_s=args.sample_every) as cpu:
            steps_s, teardown_s = fit_steps_and_teardown(model, ds, args.steps)
            wall = steps_s + teardown_s
        w = cpu.window
        walls.append(wall)
        print(json.dumps({"event": "probe_call", "label": args.label, "call": call + 1,
                          "wall_s": round(wall, 3), "steps_s": round(steps_s, 3),
                          "teardown_s": round(teardown_s, 3),
                          "autotune": not args.no_autotune,
                          "images_per_sec": round(args.steps * args.batch / wall, 1),
                          **{k: (round(v, 3) if isinstance(v, float) else v)
                             for k, v in w.to_dict().items() if k != "wall_s"},
                          "threads": len(os.listdir(f"/proc/{os.getpid()}/task"))}), flush=True)
    med = sorted(walls)[len(walls) // 2]
    slow = sum(1 for w in walls if w > 1.5 * med)
    print(json.dumps({
        "event": "probe_summary", "label": args.label, "calls": args.calls,
        "autotune": not args.no_autotune,
        "median_wall_s": round(med, 3), "calls_over_1.5x_median": slow,
        "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "env": {k: v for k, v in os.environ.items()
                if k.startswith(("TF_NUM", "TF_ENABLE", "TF_INTRA", "TF_INTER", "OMP_", "KMP_"))},
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
