"""The code task's pilot: the reference solution at 2 workers over 10 seeds, for the grader's thresholds.

Description: launches ``instructor/assessment/tape_fmnist_solution.py`` with the grader's arguments
(``course_lib.assessment.spec.SCRIPT_ARGS``) and seeds 1..10, one after another, and writes each launch's test
accuracy and the run's time (from its start to its end, without any wait for slots, as the grader times it) with the machine's stamp and speed probe to
``assessment/pilot.json``; the grader's threshold is the lowest accuracy minus the margin, its time limit a
multiple of the slowest launch (``course_lib.assessment.spec``).

How to run (about 15 minutes on 2 cores)::

    .venv/bin/python instructor/assessment/pilot.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from course_lib.assessment import spec
from course_lib.environment import machine
from course_lib.runner.launch import run_horovod

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "instructor" / "assessment" / "tape_fmnist_solution.py"


def main(argv: list[str] | None = None) -> int:
    """Run the pilot and write its numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=spec.PILOT_FILE)
    args = parser.parse_args(argv)
    probe = machine.speed_probe()
    stamp = machine.stamp(speed_s=probe)
    accuracies, launch_s = [], []
    for seed in range(1, args.seeds + 1):
        with tempfile.TemporaryDirectory() as ckpt:
            run = run_horovod(SOLUTION, [*spec.SCRIPT_ARGS, "--seed", str(seed), "--checkpoint-dir", ckpt],
                              workers=spec.WORKERS, timeout=900, output=lambda line: None)
            launch_s.append(round(run.duration_s, 1))  # the run itself, as the grader times it (no slot wait)
        accuracies.append(round(float(run.result["test_accuracy"]), 4))
        print(f"seed {seed}: test accuracy {accuracies[-1]:.4f}, launch {launch_s[-1]:.1f} s", flush=True)
    record = {"script": "instructor/assessment/tape_fmnist_solution.py", "args": list(spec.SCRIPT_ARGS),
              "workers": spec.WORKERS, "seeds": list(range(1, args.seeds + 1)), "accuracies": accuracies,
              "launch_s": launch_s, "speed_probe_s": probe, "machine": stamp,
              "load_end": machine.load_average(), "date": time.strftime("%Y-%m-%d")}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    pilot = spec.load_pilot(args.out)
    print(f"threshold {pilot.threshold:.3f} (lowest {min(accuracies):.4f} - {spec.ACCURACY_MARGIN}); time limit here "
          f"{spec.time_limit_s(pilot, probe):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
