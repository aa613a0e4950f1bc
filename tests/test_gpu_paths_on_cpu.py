"""GPU-only code paths, run on the CPU so they are not untested everywhere (issue 20, point 6).

``--mixed-precision`` (``mixed_float16`` layers + ``LossScaleOptimizer``) is meant for GPUs; on a
CPU TensorFlow emulates float16 and is very slow (measured here: about 20 s per step of batch 64
under load, against about 0.05 s in float32; the cost grows with the images), so the run is tiny: 4 steps of
batch 8 an epoch (was batch 64: 71 CPU-seconds, now about 23, issue 31). It still exercises the whole path:
policy, loss scaling, float32 outputs, the JSON events, and a falling loss.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mixed_precision_script_runs_and_learns_on_cpu() -> None:
    cmd = [sys.executable, str(ROOT / "source_code" / "horovod_fmnist.py"), "--mixed-precision",
           "--train-subset", "32", "--test-subset", "16", "--batch-size", "8", "--epochs", "2",
           "--lr", "0.003", "--json", "--deterministic", "--threads-per-worker", "1"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
                          start_new_session=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    (config,) = [e for e in events if e["event"] == "config"]
    assert config.get("mixed_precision", True) is True
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [e["steps"] for e in epochs] == [4, 4]
    assert all(math.isfinite(e["loss"]) for e in epochs), epochs  # loss scaling kept it finite
    assert epochs[1]["loss"] < epochs[0]["loss"], epochs
    (result,) = [e for e in events if e["event"] == "result"]
    assert math.isfinite(result["test_loss"]) and 0.0 <= result["test_accuracy"] <= 1.0
