"""seeding.fix_cpu_threads: numbers that do not depend on the machine's core count (issue 20).

Notebook 04's verdicts are compared by nbval on every machine; TensorFlow sizes its pools by the
cores, and the pool size changes the last bits of a sum. These tests train a few steps in fresh
processes and compare the weights bit for bit: with 1 vs 2 intra-op threads they differ (the
control: the effect is real), with ``fix_cpu_threads(2)`` on one core and on every core they are
identical.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TRAIN = r"""
import hashlib, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
mode, cpus = sys.argv[1], sys.argv[2]
if cpus != "all":
    os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
import numpy as np
from course_lib.training.keras2 import keras
import tensorflow as tf
from course_lib.training import models, seeding
if mode == "fixed":
    seeding.fix_cpu_threads(2)
else:
    tf.config.threading.set_intra_op_parallelism_threads(int(mode))
    tf.config.threading.set_inter_op_parallelism_threads(1)
seeding.configure(0, deterministic=True)
rng = np.random.default_rng(0)
x = rng.random((512, 28, 28, 1), dtype=np.float32)
y = rng.integers(0, 10, 512)
model = models.compile_model(models.build_model(seed=0), keras.optimizers.SGD(0.05))
model.fit(x, y, batch_size=128, epochs=2, shuffle=False, verbose=0)
print("digest", hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest())
"""


def _digest(mode: str, cpus: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", TRAIN, mode, cpus], capture_output=True,
                          text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split("digest ")[1].strip()


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_pool_size_changes_the_weights_so_the_control_can_fail() -> None:
    assert _digest("1", "all") != _digest("2", "all")


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_fixed_threads_give_the_same_weights_on_one_core_and_on_all() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("this test needs 2 cores to compare one core with all (make setup's machine has 2)")
    assert _digest("fixed", "0") == _digest("fixed", "all")


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_bad_thread_counts_and_a_started_runtime_are_refused() -> None:
    code = r"""
from course_lib.training.keras2 import keras
import tensorflow as tf
from course_lib.training import seeding
for bad in (0, -1, 1.5, True):
    try:
        seeding.fix_cpu_threads(bad)
    except ValueError as exc:
        print("ValueError", exc)
seeding.fix_cpu_threads(2)
tf.constant(1.0) + 1.0            # the runtime starts here
seeding.fix_cpu_threads(2)        # a re-run cell: already so, accepted
try:
    seeding.fix_cpu_threads(1)
except RuntimeError as exc:
    print("RuntimeError", exc)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ValueError threads must be an int >= 1") == 4
    assert "RuntimeError TensorFlow already started with intra/inter-op threads (2, 2)" in proc.stdout
    assert "Restart the kernel" in proc.stdout
