"""seeding.fix_cpu_threads: numbers that do not depend on the machine's core count (issue 20).

Notebook 04's verdicts are compared by nbval on every machine; TensorFlow sizes its pools by the
cores, and the pool size changes the last bits of a sum. These tests train a few steps in fresh
processes and compare the weights bit for bit: with pools of 1 vs 2 threads they differ (the
control: the effect is real), with ``fix_cpu_threads(2)`` on one core and on every core they are
identical.

Three processes in all (issue 31; were five): the run with ``fix_cpu_threads(2)`` on every core is
both the control's second run and the comparison's second run, and after training it also checks
that a started runtime refuses other pool sizes (it has started by then).
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
threads, cpus, refusals = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "refusals"
if cpus != "all":
    os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
import numpy as np
from course_lib.training.keras2 import keras
import tensorflow as tf
from course_lib.training import models, seeding
if refusals:
    for bad in (0, -1, 1.5, True):
        try:
            seeding.fix_cpu_threads(bad)
        except ValueError as exc:
            print("ValueError", exc)
seeding.fix_cpu_threads(threads)
seeding.configure(0, deterministic=True)
rng = np.random.default_rng(0)
x = rng.random((512, 28, 28, 1), dtype=np.float32)
y = rng.integers(0, 10, 512)
model = models.compile_model(models.build_model(seed=0), keras.optimizers.SGD(0.05))
model.fit(x, y, batch_size=128, epochs=2, shuffle=False, verbose=0)
print("digest", hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest())
if refusals:                                   # the runtime has started (it trained)
    seeding.fix_cpu_threads(threads)           # a re-run cell: already so, accepted
    try:
        seeding.fix_cpu_threads(threads + 1)
    except RuntimeError as exc:
        print("RuntimeError", exc)
"""


def _train(threads: int, cpus: str, refusals: bool = False) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", TRAIN, str(threads), cpus,
                           "refusals" if refusals else "-"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _digest(stdout: str) -> str:
    return stdout.split("digest ")[1].split()[0]


@pytest.fixture(scope="module")
def two_threads_on_all_cores() -> str:
    """stdout of ``fix_cpu_threads(2)`` on every core, with the refusal checks around the training."""
    return _train(2, "all", refusals=True)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_pool_size_changes_the_weights_so_the_control_can_fail(two_threads_on_all_cores: str) -> None:
    assert _digest(_train(1, "all")) != _digest(two_threads_on_all_cores)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_fixed_threads_give_the_same_weights_on_one_core_and_on_all(two_threads_on_all_cores: str) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("this test needs 2 cores to compare one core with all (make setup's machine has 2)")
    assert _digest(_train(2, "0")) == _digest(two_threads_on_all_cores)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_bad_thread_counts_and_a_started_runtime_are_refused(two_threads_on_all_cores: str) -> None:
    out = two_threads_on_all_cores
    assert out.count("ValueError threads must be an int >= 1") == 4, out
    assert "RuntimeError TensorFlow already started with intra/inter-op threads (2, 2)" in out, out
    assert "Restart the kernel" in out, out
