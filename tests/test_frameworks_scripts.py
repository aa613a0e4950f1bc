"""Notebook 07's scripts and their checks: DDP and Keras 3/JAX runs, the IDX loader, and every verdict flipped.

The scripts run for real, small, in .venv-07 (the ``frameworks-venv`` component): a 2-rank DDP run through the
course's launcher must end with identical digests and every image once; its checkpoint must resume exactly; the
JAX run's two devices must hold identical weights. Each verdict of course_lib.lessons.frameworks.frameworks is then fed
made-up counts that must flip it.
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
from course_lib.lessons.frameworks import frameworks
from course_lib.runner import launch
from course_lib.runner.runlog import RunResult
from course_lib.training.consumption import ids_hash
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
    assert "one message" in frameworks.bucket_verdict(16, 48, 16) and "more, smaller" in \
        frameworks.bucket_verdict(16, 48, 16)
    assert "no more messages" in frameworks.bucket_verdict(16, 16, 16)
    assert frameworks.no_sync_verdict(16, 8, 16, 2).endswith("True")
    assert frameworks.no_sync_verdict(16, 16, 16, 2).endswith("False")
    even = frameworks.zero_verdict({0: 100, 1: 100}, {0: 50, 1: 50})
    assert even[0].endswith("True") and "less than a DDP rank: True" in even[1]
    lost = frameworks.zero_verdict({0: 100, 1: 100}, {0: 100, 1: 40})
    assert lost[0].endswith("False") and "less than a DDP rank: False" in lost[1]


def test_the_ceiling_line_flips_three_ways():
    assert frameworks.ceiling_line("JAX", 1.60, 0.34).endswith("left a core idle, so it is no ceiling here")
    below = frameworks.ceiling_line("DDP", 0.84, 0.10)
    assert below.endswith("below its ceiling: distributing costs ≈16% of the images/s here")
    assert frameworks.ceiling_line("Horovod", 1.06, 0.31).endswith("cannot tell it from its ceiling (the interval holds 1)")
    assert frameworks.ceiling_line("DDP", 0.84, 0.10).startswith("measured: DDP at ≈0.84 ± 0.10 of its ceiling: ")


def test_the_rows_figure_shows_each_way_with_its_interval():
    rows = frameworks.rows_table([
        {"way": "A", "replicas": 2, "identical weights": True, "every image once": True, "of ceiling": 0.9,
         "ci95": 0.1, "pairs": 4},
        {"way": "B", "replicas": 2, "identical weights": True, "every image once": True, "of ceiling": 1.5,
         "ci95": 0.2, "pairs": 4}])
    ax = frameworks.plot_rows(rows).get_axes()[0]
    assert [p.get_width() for p in ax.patches] == pytest.approx([1.5, 0.9])   # the first way on top
    assert [t.get_text() for t in ax.get_yticklabels()] == ["B", "A"]
    assert ax.get_xlim()[1] >= 1.7


def test_the_summary_is_printed_from_the_table():
    rows = [{"way": "A", "replicas": 2, "identical weights": True, "every image once": True, "of ceiling": 1.0,
             "ci95": 0.1, "pairs": 2},
            {"way": "B", "replicas": 2, "identical weights": False, "every image once": True, "of ceiling": 1.0,
             "ci95": 0.1, "pairs": 2}]
    lines = frameworks.summary(frameworks.rows_table(rows))
    assert lines[0].endswith("False") and lines[1].endswith("True")
    assert frameworks.summary(frameworks.rows_table(rows[:1]))[0].endswith("True")


def test_a_row_reads_only_its_own_runs_ids_when_named():
    """mirrored_fmnist.py --ceiling trains two runs in one process: the row's coverage reads the one it names."""
    def events(run):
        config = {"event": "config", "train_size": 4, "workers": 1, "strategy": "mirrored", "run": run}
        ids = {"event": "consumed", "rank": 0, "epoch": 1, "count": 4, "unique": 4, "ids_sum": 6,
               "ids_hash": ids_hash(range(4)), "padding": 0, "padding_hash": 0, "run": run}
        return [(0, config), (0, ids)]

    run = RunResult(command=[], digests={0: "a"}, events=events("ceiling") + events("mirrored"))
    pairs = [([1.0, 1.0], [1.0, 1.0])]
    assert frameworks.framework_row("M", run, replicas=1, readers=1, pairs=pairs, label="mirrored")["every image once"]
    assert not frameworks.framework_row("M", run, replicas=1, readers=1, pairs=pairs)["every image once"]  # twice
