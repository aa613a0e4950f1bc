"""Tests of course_lib.training.devices. TF device layouts are per process: those run in subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.training import devices
from course_lib.training.machine import capacity, hardware, placement, slot_files

ROOT = Path(__file__).resolve().parents[1]


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


def test_report_text_says_what_is_simulated():
    cpu = devices.DeviceReport([], 2, ["/cpu:0", "/cpu:1"], True)
    assert "No GPU found: this is a CPU-only machine with 2 cores." in cpu.text()
    assert "simulates 2 devices by splitting the CPU" in cpu.text()
    gpu = devices.DeviceReport(["NVIDIA H100 80GB HBM3"], 16, ["/gpu:0", "/gpu:1"], True, 1024)
    assert "1 physical GPU" in gpu.text() and "2 virtual GPUs of 1024 MiB" in gpu.text()
    real = devices.DeviceReport(["A", "B"], 8, ["/cpu:0", "/gpu:0", "/gpu:1"], False)
    assert "nothing is simulated" in real.text()


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_late_simulate_raises_and_worker_config(mirrored: dict) -> None:
    """After TensorFlow initialised its devices (here: the mirrored run's, which simulated 2), another layout
    and a worker configuration are refused with the restart hint (one process with the mirrored test: issue 31)."""
    assert "Restart" in mirrored["late"] and "simulate_devices before" in mirrored["late"]
    assert "before TensorFlow initialises" in mirrored["worker"]


PIN_CHILD = """
import json, os, sys, threading, time
from course_lib.training import devices
cores = sorted(os.sched_getaffinity(0))[:2]   # at most two cores, so that the shares are known
os.sched_setaffinity(0, cores)
early = threading.Thread(target=time.sleep, args=(30,), daemon=True)  # like Horovod's background thread
early.start()
pinned = devices.pin_cpu_cores(int(sys.argv[1]), int(sys.argv[2]))
def allowed(tid):
    return sorted(os.sched_getaffinity(int(tid)))
print(json.dumps({"cores": cores, "pinned": pinned, "main": allowed(0),
                  "threads": [allowed(t) for t in os.listdir("/proc/self/task")]}))
"""


@pytest.mark.parametrize("local_rank, threads", [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2)])
def test_pin_cpu_cores_gives_each_local_rank_its_own_share(local_rank: int, threads: int) -> None:
    """Two cores: ranks 0 and 1 with one thread each get one core apiece, rank 2 wraps round to the
    first, two threads each share both; every thread moves, also one started before the call."""
    proc = subprocess.run([sys.executable, "-c", PIN_CHILD, str(local_rank), str(threads)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    cores = result["cores"]
    if len(cores) == 2 and threads == 1:
        expected = [cores[local_rank % 2]]
    else:  # two threads on two cores, or a one-core machine: the whole (one) share
        expected = cores
    assert result["pinned"] == expected and result["main"] == expected, result
    assert len(result["threads"]) >= 2 and all(t == expected for t in result["threads"]), result


@pytest.mark.parametrize("bad", [{"local_rank": -1, "threads": 1}, {"local_rank": True, "threads": 1},
                                 {"local_rank": 0, "threads": 0}, {"local_rank": 0, "threads": 1.0}])
def test_pin_cpu_cores_rejects_bad_input(bad: dict) -> None:
    with pytest.raises(ValueError, match="must be an int"):
        devices.pin_cpu_cores(**bad)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_configure_worker_shares_cpu_cores(tmp_path):
    code = """
import json, tensorflow as tf
from course_lib.training import devices
from course_lib.training.machine import hardware
name = devices.configure_worker(1, local_size=2)
print(json.dumps({"name": name, "intra": tf.config.threading.get_intra_op_parallelism_threads(),
                  "inter": tf.config.threading.get_inter_op_parallelism_threads(),
                  "gpus": len(tf.config.list_physical_devices("GPU")), "cores": hardware.cpu_cores()}))
"""
    result = run_python(code, tmp_path)
    if result["gpus"]:
        assert result["name"] == "/gpu:0"
    else:
        assert result["name"] == "/cpu:0"
        assert result["intra"] == max(1, result["cores"] // 2) and result["inter"] == 1
    with pytest.raises(ValueError):
        devices.configure_worker(2, local_size=2)


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One fresh interpreter: 2 simulated devices, a MirroredStrategy fit; then, TensorFlow initialised, a late
    ``simulate_devices(3)`` and ``configure_worker(0)`` (test_late_simulate_raises_and_worker_config's)."""
    code = """
import json
from course_lib.training import devices
names = devices.simulate_devices(2)
again = devices.simulate_devices(2)
import numpy as np, tensorflow as tf
from course_lib.training import data, models, pipeline
from course_lib.training.keras2 import keras
report = devices.describe()
arrays = data.load_arrays("keras", train_subset=1024, test_subset=256)
strategy = tf.distribute.MirroredStrategy(names)
ds, global_batch, steps = pipeline.distribute_for_strategy(
    strategy, arrays.x_train, arrays.y_train, batch_size_per_replica=32, training=True, epochs=2)
with strategy.scope():
    model = models.compile_model(models.build_model(seed=0), keras.optimizers.SGD(0.05))
history = model.fit(ds, epochs=2, steps_per_epoch=steps, verbose=0)
test_ds, _, test_steps = pipeline.distribute_for_strategy(
    strategy, arrays.x_test, arrays.y_test, batch_size_per_replica=32, training=False)
loss, acc = model.evaluate(test_ds, steps=test_steps, verbose=0)
from course_lib.training import consumption
later = consumption.ConsumedIds()   # first_epoch: a dataset of epoch 1 alone, for fit(initial_epoch=1, epochs=2)
epoch_1, _, _ = pipeline.distribute_for_strategy(strategy, arrays.x_train, arrays.y_train, batch_size_per_replica=32,
                                                  training=True, first_epoch=1, epochs=2, recorder=later)
later_batches = sum(1 for _ in epoch_1)
kernel = model.layers[0].kernel
replica_digests = [models.weights_digest([v]) for v in kernel.values]
try:  # TensorFlow has initialised its devices (2 simulated): another layout is refused
    devices.simulate_devices(3)
    late = "no error"
except devices.DevicesAlreadyInitializedError as exc:
    late = str(exc)
try:
    devices.configure_worker(0)
    worker = "no error"
except devices.DevicesAlreadyInitializedError as exc:
    worker = str(exc)
print(json.dumps({"names": names, "again": again, "replicas": strategy.num_replicas_in_sync,
                  "global_batch": global_batch, "steps": steps, "loss": history.history["loss"],
                  "test_loss": loss, "replica_digests": replica_digests,
                  "simulated": report.simulated, "text": report.text(),
                  "later_epochs": [int(e) for e in later.epochs()], "later_batches": later_batches,
                  "later_ids": later.event(1, 0)["unique"], "late": late, "worker": worker}))
"""
    return run_python(code, tmp_path_factory.mktemp("mirrored"))


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_mirrored_strategy_fit_on_simulated_devices(mirrored: dict) -> None:
    r = mirrored
    assert r["names"] == r["again"] and len(r["names"]) == 2
    assert r["replicas"] == 2 and r["global_batch"] == 64 and r["steps"] == 1024 // 64
    assert all(v == v and v < 1e3 for v in r["loss"])  # finite
    assert r["loss"][1] < r["loss"][0]
    assert len(set(r["replica_digests"])) == 1  # both replicas hold the same weights
    assert r["simulated"] and "simulates 2 devices" in r["text"]
    assert r["later_epochs"] == [1] and r["later_batches"] == r["steps"] and r["later_ids"] == 1024


# What the machine has (gpu_names, cores_per_worker, gpu_for_rank): tests/test_hardware.py; the lessons' plans
# (plan_workers, machine_capacity, mirrored_layout) for every machine shape: tests/test_capacity.py.
CORES = (1, 2, 4, 16)
GPUS = (0, 1, 2, 8)


@pytest.mark.parametrize("cores", CORES)
@pytest.mark.parametrize("gpus", GPUS)
def test_machine_facts_are_printed_on_masked_lines(gpus, cores):
    names = ["NVIDIA H100 80GB HBM3"] * gpus
    line = hardware.machine_line(names, cores)
    assert line.startswith("on this machine: ") and "\n" not in line and f"{cores} CPU core" in line
    report = devices.DeviceReport(names, cores, ["/cpu:0", "/cpu:1"], True, 1024 if gpus else None)
    shown = report.text(prefix="on this machine: ")
    assert all(row.startswith("on this machine: ") for row in shown.splitlines())
    assert shown.replace("on this machine: ", "") == report.text()


# ------------------------------------------------------------------ the notebooks' one import for machine facts
def _notebook_calls() -> set[str]:
    """Every ``devices.NAME`` a notebook's code calls (the import ``from course_lib.training import devices``)."""
    called: set[str] = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                called |= set(re.findall(r"\bdevices\.(\w+)", "".join(cell["source"])))
    return called


def _machine_names() -> set[str]:
    """Every public name of course_lib.training.machine's modules that devices does not define itself."""
    own = set(devices.__all__) - set(devices.NOTEBOOK_MACHINE_FACTS)   # e.g. devices.describe, its own
    return {name for module in (hardware, capacity, placement, slot_files) for name in module.__all__} - own


def test_devices_hands_on_exactly_the_machine_facts_the_notebooks_call():
    """devices re-exports a machine fact only because a notebook calls it there, and hands on the home's object."""
    called = _notebook_calls() & _machine_names()
    assert set(devices.NOTEBOOK_MACHINE_FACTS) == called, "devices.NOTEBOOK_MACHINE_FACTS is not what notebooks call"
    assert set(devices.__all__) & _machine_names() == called
    homes = {name: module for module in (hardware, capacity) for name in module.__all__}
    for name in called:
        assert getattr(devices, name) is getattr(homes[name], name), name


def test_no_code_outside_the_notebooks_takes_a_machine_fact_from_devices():
    """Scripts, the package, tests, tools and benchmarks import each machine fact from its home (no chains)."""
    names = "|".join(sorted(_machine_names()))
    pattern = re.compile(rf"\bdevices\.({names})\b|from course_lib\.training\.devices import [^\n]*\b({names})\b")
    found = []
    for folder in ("course_lib", "source_code", "tests", "tools", "benchmarks", "instructor"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "course_lib" / "training" / "devices.py":
                continue
            found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in pattern.finditer(path.read_text("utf-8"))]
    assert found == []
