"""Tests of course_lib.training.devices. TF device layouts are per process: those run in subprocesses."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from course_lib.training import devices


def run_python(code: str, tmp_path, timeout: int = 300) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "2"])
def test_bad_n_raises_value_error(n):
    with pytest.raises(ValueError, match="n must be an int"):
        devices.simulate_devices(n)


def _fake_nvidia_smi(tmp_path, body: str, monkeypatch):
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_gpu_names_parses_nvidia_smi(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path, "echo 'GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbb)'\n"
                               "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaa)'", monkeypatch)
    assert devices.gpu_names() == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]


def test_gpu_names_empty_when_missing_or_failing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert devices.gpu_names() == []
    _fake_nvidia_smi(tmp_path, "echo 'NVIDIA-SMI has failed' >&2; exit 9", monkeypatch)
    assert devices.gpu_names() == []


def test_report_text_says_what_is_simulated():
    cpu = devices.DeviceReport([], 2, ["/cpu:0", "/cpu:1"], True)
    assert "No GPU found: this is a CPU-only machine with 2 cores." in cpu.text()
    assert "simulates 2 devices by splitting the CPU" in cpu.text()
    gpu = devices.DeviceReport(["NVIDIA H100 80GB HBM3"], 16, ["/gpu:0", "/gpu:1"], True, 1024)
    assert "1 physical GPU" in gpu.text() and "2 virtual GPUs of 1024 MiB" in gpu.text()
    real = devices.DeviceReport(["A", "B"], 8, ["/cpu:0", "/gpu:0", "/gpu:1"], False)
    assert "nothing is simulated" in real.text()


def test_late_simulate_raises_and_worker_config(tmp_path):
    code = """
import json, tensorflow as tf
from course_lib.training import devices
tf.constant(1.0)  # TensorFlow initialises its devices
try:
    devices.simulate_devices(2)
    late = "no error"
except devices.DevicesAlreadyInitializedError as exc:
    late = str(exc)
try:
    devices.configure_worker(0)
    worker = "no error"
except devices.DevicesAlreadyInitializedError as exc:
    worker = str(exc)
print(json.dumps({"late": late, "worker": worker}))
"""
    result = run_python(code, tmp_path)
    assert "Restart" in result["late"] and "simulate_devices before" in result["late"]
    assert "before TensorFlow initialises" in result["worker"]


def test_configure_worker_shares_cpu_cores(tmp_path):
    code = """
import json, tensorflow as tf
from course_lib.training import devices
name = devices.configure_worker(1, local_size=2)
print(json.dumps({"name": name, "intra": tf.config.threading.get_intra_op_parallelism_threads(),
                  "inter": tf.config.threading.get_inter_op_parallelism_threads(),
                  "gpus": len(tf.config.list_physical_devices("GPU")), "cores": devices.cpu_cores()}))
"""
    result = run_python(code, tmp_path)
    if result["gpus"]:
        assert result["name"] == "/gpu:0"
    else:
        assert result["name"] == "/cpu:0"
        assert result["intra"] == max(1, result["cores"] // 2) and result["inter"] == 1
    with pytest.raises(ValueError):
        devices.configure_worker(2, local_size=2)


def test_mirrored_strategy_fit_on_simulated_devices(tmp_path):
    code = """
import json
from course_lib.training import devices
names = devices.simulate_devices(2)
again = devices.simulate_devices(2)
import numpy as np, tensorflow as tf
from course_lib.training import data, models, pipeline
report = devices.describe()
arrays = data.load_arrays("keras", train_subset=1024, test_subset=256)
strategy = tf.distribute.MirroredStrategy(names)
ds, global_batch, steps = pipeline.distribute_for_strategy(
    strategy, arrays.x_train, arrays.y_train, batch_size_per_replica=32, training=True, epochs=2)
with strategy.scope():
    model = models.compile_model(models.build_model(seed=0), tf.keras.optimizers.SGD(0.05))
history = model.fit(ds, epochs=2, steps_per_epoch=steps, verbose=0)
test_ds, _, test_steps = pipeline.distribute_for_strategy(
    strategy, arrays.x_test, arrays.y_test, batch_size_per_replica=32, training=False)
loss, acc = model.evaluate(test_ds, steps=test_steps, verbose=0)
kernel = model.layers[0].kernel
replica_digests = [models.weights_digest([v]) for v in kernel.values]
print(json.dumps({"names": names, "again": again, "replicas": strategy.num_replicas_in_sync,
                  "global_batch": global_batch, "steps": steps, "loss": history.history["loss"],
                  "test_loss": loss, "replica_digests": replica_digests,
                  "simulated": report.simulated, "text": report.text()}))
"""
    r = run_python(code, tmp_path)
    assert r["names"] == r["again"] and len(r["names"]) == 2
    assert r["replicas"] == 2 and r["global_batch"] == 64 and r["steps"] == 1024 // 64
    assert all(v == v and v < 1e3 for v in r["loss"])  # finite
    assert r["loss"][1] < r["loss"][0]
    assert len(set(r["replica_digests"])) == 1  # both replicas hold the same weights
    assert r["simulated"] and "simulates 2 devices" in r["text"]


@pytest.mark.parametrize("gpus, cores, workers, share, oversubscribe", [
    (0, 2, 2, False, False),   # this CPU machine: 2 processes, one thread each
    (0, 1, 2, False, True),    # one core: the 2 processes take turns
    (1, 8, 2, True, True),     # one GPU, the common learner set-up: 2 workers share it
    (2, 8, 2, False, False),
    (8, 32, 8, False, False),
])
def test_plan_workers_from_fake_nvidia_smi(tmp_path, monkeypatch, gpus, cores, workers, share,
                                           oversubscribe):
    lines = "".join(f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})'\n" for i in range(gpus))
    _fake_nvidia_smi(tmp_path, lines or "exit 0", monkeypatch)
    monkeypatch.setattr(devices, "cpu_cores", lambda: cores)
    plan = devices.plan_workers()
    assert (plan.gpus, plan.workers, plan.share_gpu, plan.oversubscribe) == (gpus, workers, share,
                                                                              oversubscribe)
    assert plan.full_data == (gpus > 0)
    assert ("share" in plan.text) == share
    assert ("CPU processes" in plan.text) == (gpus == 0)


def test_plan_workers_agrees_with_the_launcher_slots(monkeypatch):
    from course_lib.runner import preflight

    for gpus in (0, 1, 2, 8):
        monkeypatch.setattr(preflight, "gpu_count", lambda g=gpus: g)
        plan = devices.plan_workers(gpus, preflight.cpu_cores())
        assert plan.oversubscribe == (plan.workers > preflight.available_slots())


@pytest.mark.parametrize("kwargs", [dict(gpus=-1), dict(cores=True), dict(at_least=1),
                                    dict(at_least=4, at_most=3)])
def test_plan_workers_rejects_bad_input(kwargs):
    with pytest.raises(ValueError, match="must be"):
        devices.plan_workers(**{"gpus": 0, "cores": 2, **kwargs})
