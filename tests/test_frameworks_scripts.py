"""Notebook 07's scripts and their checks: DDP and Keras 3/JAX runs, the IDX loader, and every verdict flipped.

The scripts run for real, small, in .venv-07 (the ``frameworks-venv`` component): a 2-rank DDP run through the
course's launcher must end with identical digests and every image once; its checkpoint must resume exactly; the
JAX run's two devices must hold identical weights. Each verdict of course_lib.lessons.frameworks.frameworks is then fed
made-up counts that must flip it: rows that are not one job (another learning rate, another window) are flagged,
a way above its bound says the bound failed, an interval too wide for ±0.05 says "cannot tell" and names the
``make bench`` section.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from course_lib.lessons.common.coverage import check_coverage
from course_lib.lessons.frameworks import ddp_knobs, frameworks, job
from course_lib.runner import launch
from course_lib.runner.runlog import RunResult
from course_lib.training.fmnist_files import DataCorruptError
from course_lib.training.idx_arrays import load_idx_arrays, read_idx
from script_lr import RULE_CASES, lr_problems

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "source_code"
TINY = ["--train-subset", "515", "--test-subset", "128", "--batch-size", "64", "--json"]  # 515: one padded copy
needs_venv = pytest.mark.requires("frameworks-venv")


@pytest.fixture(autouse=True)
def private_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSE_SLOTS", "2")


def fw() -> str:
    from course_lib.environment.frameworks import frameworks_python

    return str(frameworks_python())


def test_read_idx_parses_and_refuses():
    raw = bytes([0, 0, 8, 2]) + struct.pack(">2I", 2, 3) + bytes(range(6))
    assert read_idx(raw).tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(DataCorruptError, match="unsigned-byte"):
        read_idx(bytes([0, 0, 9, 1]) + struct.pack(">I", 1) + b"\0")
    with pytest.raises(DataCorruptError, match="bytes of data"):
        read_idx(bytes([0, 0, 8, 1]) + struct.pack(">I", 5) + b"\0")


def test_the_idx_loader_reads_the_published_files_and_refuses_an_altered_one(tmp_path):
    x_train, y_train, x_test, y_test = load_idx_arrays(100, 10)
    assert x_train.shape == (100, 28, 28) and y_test.shape == (10,) and x_train.dtype == np.uint8
    assert set(np.unique(y_train)) <= set(range(10))
    from course_lib.training.fmnist_files import find_raw_files

    source = find_raw_files()
    for f in source.glob("*.gz"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    labels = tmp_path / "t10k-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.decompress(labels.read_bytes()))
    raw[-1] = (raw[-1] + 1) % 10  # one label changed
    labels.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(DataCorruptError, match="sha256"):
        load_idx_arrays(directory=tmp_path)
    with pytest.raises(ValueError, match="train_subset"):
        load_idx_arrays(0)


@needs_venv
@pytest.mark.slow
def test_ddp_two_ranks_identical_weights_every_image_once_and_an_exact_resume(tmp_path):
    from course_lib.runner.torchrun import run_torchrun

    ckpt = ["--checkpoint-dir", str(tmp_path / "ckpt")]
    first = run_torchrun(CODE / "ddp_fmnist.py", [*TINY, "--epochs", "1", *ckpt], workers=2, python=fw(), timeout=300,
                         show="none")
    assert frameworks.identical_weights(first, 2)
    cov = check_coverage(first)
    assert cov.ok and cov.readers == 2, cov
    assert first.config["steps_per_epoch"] == 5  # 516 ids (one padded) over 2 ranks, 64 per step
    again = run_torchrun(CODE / "ddp_fmnist.py", [*TINY, "--epochs", "2", *ckpt], workers=2, python=fw(), timeout=300,
                         show="none")
    resume = next(e for _, e in again.events if e["event"] == "resume")
    assert resume["epoch"] == 1 and resume["digest"] == first.checkpoints[-1]["digest"]
    assert [e["epoch"] for e in again.epochs] == [2]


@needs_venv
@pytest.mark.slow
def test_keras3_jax_two_devices_hold_identical_weights_and_one_reader_covers_every_image():
    run = launch.run_python(CODE / "jax_fmnist.py", ["--devices", "2", *TINY[:1], "512", *TINY[2:], "--epochs", "1"],
                            python=fw(), timeout=300, output=[].append)
    assert frameworks.identical_weights(run, 2)
    assert check_coverage(run, readers=1).ok
    with pytest.raises(launch.RunFailedError, match="multiple of --devices"):
        launch.run_python(CODE / "jax_fmnist.py", ["--devices", "2", "--train-subset", "515"], python=fw(),
                          timeout=120, output=[].append)


# In .venv-07's python: both scripts' --scale-lr rate for N = 1, 2, 4 (and without the switch), and DDP's device
# choice with CUDA faked on and off, and where a batch goes (the meta device: a device with no memory, there without
# a GPU, standing in for cuda:local_rank, which a machine without one cannot hold).
PROBE = """
import importlib.util, json, sys
import numpy as np
import torch

def load(path):
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

ddp, jax = load(sys.argv[1]), load(sys.argv[2])
out = {name: {n: [m.learning_rate(m.parse_args(["--lr", "0.001", "--scale-lr"]), n),
                  m.learning_rate(m.parse_args(["--lr", "0.001"]), n)] for n in (1, 2, 4)}
       for name, m in (("ddp", ddp), ("jax", jax))}
torch.cuda.is_available = lambda: False
backend, device = ddp.pick_device(1)
out["without_cuda"] = [backend, str(device)]
torch.cuda.is_available = lambda: True
backend, device = ddp.pick_device(1)
out["with_cuda"] = [backend, str(device)]
x, y = np.zeros((3, 28, 28), np.uint8), np.arange(3, dtype=np.uint8)
out["batches"] = [[str(i.device), str(t.device), list(i.shape)]
                  for i, t in ddp.batches(x, y, np.arange(3), 2, torch.device("meta"))]
print(json.dumps(out))
"""


@needs_venv
def test_ddp_and_jax_scale_lr_by_the_courses_rule_and_ddp_puts_model_and_batches_on_the_cuda_device():
    """issue 52: DDP's and JAX's --scale-lr is the rule of the TensorFlow scripts (Adam: x sqrt(N), through
    schedules.scaled_lr; off, --lr), so notebook 07's four ways print one rate. With CUDA (faked here: no GPU on the
    course's machines) DDP picks NCCL and cuda:LOCAL_RANK, moves the model there and passes device_ids=[local_rank],
    and every batch goes to the device it is given; without CUDA, Gloo on the CPU."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([fw(), "-c", PROBE, str(CODE / "ddp_fmnist.py"), str(CODE / "jax_fmnist.py")],
                          capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    adam = {workers: expected for optimizer, workers, expected in RULE_CASES if optimizer == "adam"} | {1: 0.001}
    for name in ("ddp", "jax"):
        for workers, expected in adam.items():
            scaled, unscaled = out[name][str(workers)]
            assert scaled == pytest.approx(expected, rel=1e-12) and unscaled == 0.001, (name, workers, out[name])
    assert out["without_cuda"] == ["gloo", "cpu"] and out["with_cuda"] == ["nccl", "cuda:1"], out
    assert out["batches"] == [["meta", "meta", [2, 1, 28, 28]], ["meta", "meta", [1, 1, 28, 28]]], out


@pytest.mark.parametrize("script", ["ddp_fmnist.py", "jax_fmnist.py"])
def test_the_printed_lr_of_ddp_and_jax_is_the_rules(script):
    """Every ``lr`` they print and train with comes from learning_rate() (schedules.scaled_lr); DDP's model goes
    to its device, wrapped with device_ids, and each batches() call is given the device (read from the source)."""
    assert lr_problems(CODE / script) == []
    if script == "ddp_fmnist.py":
        text = (CODE / script).read_text()
        assert "DDP(course_cnn().to(device), device_ids=on_gpu" in text
        assert 'on_gpu = [local_rank] if device.type == "cuda" else None' in text
        calls = [node for node in ast.walk(ast.parse(text))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "batches"]
        assert len(calls) == 2 and all(ast.unparse(call.args[-1]) == "device" for call in calls)  # train, test
        assert "untested on a GPU" in text


def test_identical_weights_flips():
    run = RunResult(command=[], digests={0: "a", 1: "a"})
    assert frameworks.identical_weights(run, 2)
    assert not frameworks.identical_weights(RunResult(command=[], digests={0: "a", 1: "b"}), 2)
    assert not frameworks.identical_weights(RunResult(command=[], digests={0: "a"}), 2)  # a replica missing
    assert not frameworks.identical_weights(run, 2, digests={0: "a", 1: "c"})


def test_the_concept_map_verdicts_flip():
    assert "one message" in ddp_knobs.bucket_verdict(16, 48, 16) and "more, smaller" in \
        ddp_knobs.bucket_verdict(16, 48, 16)
    assert "no more messages" in ddp_knobs.bucket_verdict(16, 16, 16)
    assert ddp_knobs.no_sync_verdict(16, 8, 16, 2).endswith("True")
    assert ddp_knobs.no_sync_verdict(16, 16, 16, 2).endswith("False")
    even = ddp_knobs.zero_verdict({0: 100, 1: 100}, {0: 50, 1: 50})
    assert even[0].endswith("True") and "less than a DDP rank: True" in even[1]
    lost = ddp_knobs.zero_verdict({0: 100, 1: 100}, {0: 100, 1: 40})
    assert lost[0].endswith("False") and "less than a DDP rank: False" in lost[1]


def test_the_summary_is_printed_from_the_table():
    rows = [{"way": "A", "replicas": 2, "identical weights": True, "every image once": True},
            {"way": "B", "replicas": 2, "identical weights": False, "every image once": True}]
    lines = frameworks.summary(frameworks.rows_table(rows))
    assert lines[0].endswith("False") and lines[1].endswith("True")
    assert frameworks.summary(frameworks.rows_table(rows[:1]))[0].endswith("True")


# ---------------------------------------------------------------- one job, each way against its own bound (issue 52)

def meter_events(warmup_steps, *, steps=8, epochs=3, step_s=0.05):
    """The epoch events the course's one meter prints for a run timed with ``warmup_steps`` (a fake clock)."""
    import io

    from course_lib.training.throughput import ThroughputMeter

    now = [0.0]
    out = io.StringIO()
    meter = ThroughputMeter(64, samples_per_epoch=steps * 64, warmup_steps=warmup_steps, json_lines=True,
                            verbose=False, clock=lambda: now[0], stream=out)
    for epoch in range(epochs):
        meter.on_epoch_begin(epoch)
        for step in range(steps):
            now[0] += step_s * (3 if step == 0 else 1)   # step 1 is slow, as a first step is
            meter.on_train_batch_end(step)
        meter.on_epoch_end(epoch, {})
    return [json.loads(line) for line in out.getvalue().splitlines()]


def a_run(rates, *, lr=0.001, warmup_steps=1, way_rank=0, workers=2, steps=8):
    """A RunResult with a config event and one timed epoch per rate (after a warm-up epoch)."""
    events = [(way_rank, {"event": "config", "lr": lr, "per_worker_batch": 64, "train_size": 1024,
                          "steps_per_epoch": steps, "workers": workers})]
    template = meter_events(warmup_steps, epochs=len(rates) + 1)
    for event, rate in zip(template, [rates[0], *rates]):
        events.append((way_rank, {**event, "images_per_sec": rate}))
    return RunResult(command=[], config=events[0][1], epochs=[e for _, e in events[1:]], events=events)


def test_the_timed_window_is_read_from_the_meters_own_events():
    """The TF scripts' meter and the torch/JAX scripts' (the same class) say which steps their rate spans."""
    assert frameworks.timed_window(a_run([1.0, 1.0], warmup_steps=1)) == "from the end of step 1"
    assert frameworks.timed_window(a_run([1.0, 1.0], warmup_steps=0)) == "every step (step 1 counted)"
    mixed = a_run([1.0], warmup_steps=1)
    mixed.epochs.append(meter_events(0)[1])
    assert frameworks.timed_window(mixed) == "mixed"
    assert frameworks.timed_window(RunResult(command=[], epochs=[{"images_per_sec": 1.0}])) == "unknown"


def test_rows_that_are_not_one_job_are_flagged_with_each_ways_value():
    def row(way, **changes):
        return {**frameworks.job_row(way, a_run([1.0, 1.0], **changes), replicas=2)}

    ok, lines = frameworks.same_job([row("A"), row("B")])
    assert ok and all(line.endswith("True") for line in lines) and len(lines) == len(frameworks.JOB_FIELDS)
    ok, lines = frameworks.same_job([row("A"), row("B", lr=0.00141421)])   # DDP and JAX before issue 52
    assert not ok
    assert "same lr in every row: False (A: 0.001, B: 0.00141421)" in lines
    ok, lines = frameworks.same_job([row("A"), row("B", warmup_steps=0)])  # step 1 counted in one row only
    assert not ok and any(line.startswith("same timed window in every row: False") for line in lines)
    ok, lines = frameworks.same_job([row("A"), row("B", steps=16)])
    assert not ok and "same steps per epoch in every row: False (A: 8, B: 16)" in lines


def test_each_way_is_divided_by_its_own_bound_launch_by_launch():
    rounds = [{"W": a_run([900.0, 900.0]), "V": a_run([400.0, 400.0]),
               "bW": a_run([1000.0, 1000.0]), "bV": a_run([500.0, 500.0])},
              {"W": a_run([880.0, 920.0]), "V": a_run([420.0, 380.0]),
               "bW": a_run([990.0, 1010.0]), "bV": a_run([510.0, 490.0])},
              {"W": a_run([950.0, 950.0]), "V": a_run([400.0, 400.0]),
               "bW": a_run([1000.0, 1000.0]), "bV": a_run([500.0, 500.0])}]
    rows = frameworks.efficiency_rows(rounds, ["W", "V"], {"W": "bW", "V": "bV"})
    w, v = rows
    assert w["efficiency"].pairs == 3 and w["efficiency"].unit == "rounds"
    assert w["efficiency"].mean == pytest.approx((0.9 + 0.9 + 0.95) / 3)
    assert v["efficiency"].mean == pytest.approx(0.8)
    assert w["bound images/s"] == pytest.approx(1000.0) and v["bound images/s"] == pytest.approx(500.0)
    assert w["line"].startswith("W, 2 workers: distribution efficiency ≈0.92 ± ")
    assert w["line"].endswith("(95 %, 3 rounds): within its bound")
    crossed = frameworks.efficiency_rows(rounds, ["V"], {"V": "bW"})[0]   # the wrong bound: another number
    assert crossed["efficiency"].mean == pytest.approx(0.4, abs=0.01)
    above = [{"W": a_run([1300.0, 1300.0]), "bW": a_run([1000.0, 1000.0])},
             {"W": a_run([1310.0, 1290.0]), "bW": a_run([1000.0, 1000.0])}]
    assert "the bound failed" in frameworks.efficiency_rows(above, ["W"], {"W": "bW"})[0]["line"]


def test_an_interval_too_wide_for_005_says_cannot_tell_and_names_the_bench_section():
    from course_lib.lessons.common.paired_runs import Paired
    from course_lib.training.stats import t_critical_95

    assert frameworks.resolution_line("DDP", Paired(0.9, 0.04, 3, "rounds")).endswith(": True")
    assert frameworks.resolution_line("DDP", Paired(0.9, 0.04, 3, "rounds")).startswith("measured: DDP: ")  # masked
    wide = Paired(0.9, 0.20, 3, "rounds")
    line = frameworks.resolution_line("DDP", wide)
    needed = frameworks.rounds_needed(wide, 0.05)
    assert "False: cannot tell its efficiency to ±0.05 here; `make bench` section 1f" in line
    assert f"≈{needed} rounds" in line
    spread = 0.20 * 3 ** 0.5 / t_critical_95(2)
    assert t_critical_95(needed - 1) * spread / needed ** 0.5 <= 0.05 < t_critical_95(needed - 2) * spread / (needed - 1) ** 0.5
    assert frameworks.rounds_needed(Paired(0.9, float("nan"), 1, "rounds"), 0.05) is None


def test_the_step_split_line_sets_dispatch_and_kernels_against_fits_step():
    run = RunResult(command=[], events=[(0, {"event": "step_split", "compile_ms": 1900.0, "dispatch_ms": 0.6,
                                             "kernel_ms": 180.0, "steps": 5, "batch": 64})])
    line = frameworks.step_split_line(run, 190.0)
    assert "compiling the train step took 1900 ms, once; then a step (mean of 5) = dispatch 0.6 ms + kernels 180 ms" \
        in line
    assert line.endswith("kernels ≈100% of it; fit's step in the same launch: 190 ms")
    heavy = RunResult(command=[], events=[(0, {"event": "step_split", "compile_ms": 10.0, "dispatch_ms": 30.0,
                                               "kernel_ms": 70.0, "steps": 5, "batch": 64})])
    assert "kernels ≈70% of it" in frameworks.step_split_line(heavy, 100.0)
    with pytest.raises(ValueError, match="--step-split"):
        frameworks.step_split_line(RunResult(command=[]), 190.0)


def test_the_rows_figure_shows_each_way_with_its_interval():
    from course_lib.lessons.common.paired_runs import Paired

    rows = [{"way": "A", "efficiency": Paired(0.9, 0.1, 3, "rounds")},
            {"way": "B", "efficiency": Paired(0.7, 0.2, 3, "rounds")}]
    ax = frameworks.plot_rows(rows).get_axes()[0]
    assert [p.get_width() for p in ax.patches] == pytest.approx([0.7, 0.9])   # the first way on top
    assert [t.get_text() for t in ax.get_yticklabels()] == ["B", "A"]
    assert ax.get_xlim()[1] >= 1.2


def test_a_round_launches_every_way_and_its_bound_in_alternating_order(monkeypatch):
    """Every way and each bound it needs once per round; odd rounds reversed; the extra flags only where asked;
    every launch gets the same job arguments."""
    names = [item.name for item in job.launches(2)]
    assert names == ["MirroredStrategy", "Horovod", "PyTorch DDP", "Keras 3 + JAX", "tf_keras bound", "torch bound",
                     "Keras 3 bound"]
    assert [item.name for item in job.launches(2, ["PyTorch DDP"])] == ["PyTorch DDP", "torch bound"]
    assert job.launches(3)[0].args == ("--devices", "3")
    with pytest.raises(ValueError, match="unknown way"):
        job.launches(2, ["MXNet"])
    calls = []
    monkeypatch.setattr(job, "launch", lambda item, args, extra=(), **kw: calls.append((item.name, list(args),
                                                                                        list(extra))) or item.name)
    args = job.job_args(train_subset=1024, epochs=3)
    done = job.run_rounds(2, args, code=CODE, plan=2, frameworks_python="fw", ways=["PyTorch DDP", "Horovod"],
                          extra=lambda i, name: ["--step-split", "5"] if (i, name) == (0, "torch bound") else [],
                          say=lambda line: None)
    assert [c[0] for c in calls] == ["PyTorch DDP", "Horovod", "tf_keras bound", "torch bound",
                                     "torch bound", "tf_keras bound", "Horovod", "PyTorch DDP"]
    assert all(c[1] == args for c in calls) and "--lr" in args and "--scale-lr" not in args
    assert [c[2] for c in calls].count(["--step-split", "5"]) == 1 and calls[3][2] == ["--step-split", "5"]
    assert [sorted(r) for r in done] == [sorted(["PyTorch DDP", "Horovod", "tf_keras bound", "torch bound"])] * 2
    assert "--scale-lr" in job.job_args(train_subset=1024, epochs=3, scale_lr=True)


def test_the_bounds_are_each_ways_one_worker_script():
    scripts = {b.name: b.script for b in job.BOUNDS}
    ways = {w.name: w.script for w in job.WAYS}
    assert scripts[job.BOUND_OF["PyTorch DDP"]] == "torch_fmnist.py"
    assert scripts[job.BOUND_OF["Keras 3 + JAX"]] == "keras3_fmnist.py"
    assert scripts[job.BOUND_OF["Horovod"]] == ways["Horovod"]   # the same script, one worker, no horovodrun
    assert job.BOUND_OF["MirroredStrategy"] == job.BOUND_OF["Horovod"]
    assert all(b.launcher == "bound" for b in job.BOUNDS)


@needs_venv
def test_torch_times_from_the_end_of_step_1_and_its_bound_sums_two_copies():
    """torch_fmnist.py times with the course's meter (step 1 out); under run_bound two copies each train half."""
    from course_lib.lessons.common.paired_runs import timed_rates
    from course_lib.runner.multiworker import run_bound

    run = run_bound(CODE / "torch_fmnist.py", ["--train-subset", "256", "--test-subset", "64", "--epochs", "2",
                                               "--batch-size", "32", "--json"], workers=2, python=fw(), timeout=300,
                    show="none")
    assert frameworks.timed_window(run) == "from the end of step 1"
    configs = [e for _, e in run.events if e["event"] == "config"]
    assert [c["train_size"] for c in configs] == [128, 128] and configs[0]["steps_per_epoch"] == 4
    per_copy = {rank: [e["images_per_sec"] for r, e in run.events if r == rank and e["event"] == "epoch"
                       and not e["warmup"]] for rank in (0, 1)}
    assert timed_rates(run) == pytest.approx([per_copy[0][0] + per_copy[1][0]])


@needs_venv
@pytest.mark.slow
def test_keras3_times_from_the_end_of_step_1_and_splits_its_step():
    run = launch.run_python(CODE / "keras3_fmnist.py", ["--train-subset", "256", "--test-subset", "64", "--epochs",
                                                         "2", "--step-split", "2", "--json"],
                            python=fw(), timeout=300, output=[].append)
    assert frameworks.timed_window(run) == "from the end of step 1"
    split = next(e for _, e in run.events if e["event"] == "step_split")
    assert split["steps"] == 2 and split["batch"] == 64
    assert split["compile_ms"] > 0 and split["dispatch_ms"] > 0 and split["kernel_ms"] > 0
    assert "kernels ≈" in frameworks.step_split_line(run, 100.0)


def test_the_bench_section_runs_its_declared_rounds_and_reports_each_way_against_its_bound():
    from benchmarks import frameworks as section

    seen = {}

    def fake_rounds(rounds, args, *, ways, **kw):
        seen.update(rounds=rounds, args=args, ways=ways)
        one = {"PyTorch DDP": 800.0, "torch bound": 1000.0}
        return [{name: a_run([rate * (1 + 0.01 * i)] * 2) for name, rate in one.items()} for i in range(rounds)]

    lines = []
    out = section.frameworks_section(rounds=4, ways=["PyTorch DDP"], frameworks_python="fw", printer=lines.append,
                                     run_rounds=fake_rounds)
    assert seen == {"rounds": 4, "args": job.job_args(train_subset=section.TRAIN_SUBSET, epochs=section.EPOCHS),
                    "ways": ["PyTorch DDP"]}
    (row,) = out["ways"]
    assert out["declared_rounds"] == 4 and row["rounds"] == 4 and row["bound"] == "torch bound"
    assert row["efficiency"] == pytest.approx(0.8) and row["resolved"] and out["same_job"]
    assert any(line.startswith("PyTorch DDP, 2 workers: distribution efficiency ≈0.80 ± 0.00") for line in lines)
    assert section.ROUNDS >= 3
