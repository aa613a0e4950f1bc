"""mirrored_fmnist.py's printed learning rate under ``--scale-lr`` follows the course's rule per optimizer (issue 52,
item 6): with 2 replicas, Adam's rate is 0.001 × √2 and SGD's 2 × 0.001, in the line a learner reads and in the
JSON ``config`` event the notebooks parse. tests/test_scripts.py checks the rule through ``learning_rate()`` and
the source; this test runs the script itself (two tiny runs in one process, tests/scripts/runs_in_turn.py)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIRRORED_SCRIPT = ROOT / "source_code" / "mirrored_fmnist.py"
RUNS_IN_TURN = ROOT / "tests" / "scripts" / "runs_in_turn.py"
TINY = ["--devices", "2", "--epochs", "1", "--train-subset", "64", "--test-subset", "32", "--batch-size", "16",
        "--lr", "0.001", "--scale-lr", "--json"]
#: The rule at 2 replicas from --lr 0.001 (course_lib.training.schedules.scaled_lr): x sqrt(N) for Adam, x N for SGD.
EXPECTED = {"adam": 0.001 * math.sqrt(2), "sgd": 0.002}
HEADLINE = re.compile(r"^(\d+) replica\(s\), optimizer (\w+), lr (\S+), epochs")


def printed_lrs(out: str) -> dict[str, dict[str, float]]:
    """Per optimizer, the rate of the printed line (``2 replica(s), optimizer adam, lr 0.00141421, ...``) and of the
    JSON ``config`` event, from the output of runs_in_turn.py (lines that are neither are skipped)."""
    found: dict[str, dict[str, float]] = {}
    for line in out.splitlines():
        text = line.strip()
        headline = HEADLINE.match(text)
        if headline and headline.group(1) == "2":
            found.setdefault(headline.group(2), {})["printed"] = float(headline.group(3))
        elif text.startswith("{"):
            event = json.loads(text)
            if event.get("event") == "config":
                assert event["workers"] == 2 and event["scale_lr"] is True, event
                found.setdefault(event["optimizer"], {})["json"] = event["lr"]
    return found


def mismatches(found: dict[str, dict[str, float]]) -> list[str]:
    """What differs from :data:`EXPECTED` (the printed line rounds to 6 significant digits, ``:g``)."""
    problems = []
    for optimizer, rate in EXPECTED.items():
        got = found.get(optimizer, {})
        if set(got) != {"printed", "json"}:
            problems.append(f"{optimizer}: printed line and config event not both found ({sorted(got)})")
            continue
        if got["json"] != pytest.approx(rate, rel=1e-12):
            problems.append(f"{optimizer}: config lr {got['json']!r}, the rule gives {rate!r}")
        if got["printed"] != pytest.approx(rate, rel=1e-5):
            problems.append(f"{optimizer}: printed lr {got['printed']!r}, the rule gives {rate:g}")
    return problems


@pytest.mark.slow  # > 2 s: one TensorFlow start, two runs of 2 steps
def test_mirrored_prints_the_courses_rate_for_adam_and_sgd_with_two_replicas() -> None:
    runs = [[*TINY, "--optimizer", "adam"], [*TINY, "--optimizer", "sgd"]]
    done = subprocess.run([sys.executable, str(RUNS_IN_TURN), str(MIRRORED_SCRIPT), json.dumps(runs)], cwd=ROOT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    found = printed_lrs(done.stdout)
    assert mismatches(found) == [], done.stdout[-3000:]
    assert found["adam"]["json"] == pytest.approx(0.001 * math.sqrt(2)) and found["sgd"]["json"] == pytest.approx(0.002)


def test_the_check_fails_on_the_old_linear_rule() -> None:
    """Planted: the output of the old --scale-lr (x N for every optimizer: Adam at 0.002) and of a run without the
    switch (0.001) are caught."""
    def output(adam: float, sgd: float) -> str:
        return "\n".join(line for optimizer, rate in (("adam", adam), ("sgd", sgd)) for line in (
            f"2 replica(s), optimizer {optimizer}, lr {rate:g}, epochs 1..1",
            json.dumps({"event": "config", "workers": 2, "scale_lr": True, "optimizer": optimizer, "lr": rate})))

    assert mismatches(printed_lrs(output(0.001 * math.sqrt(2), 0.002))) == []
    assert mismatches(printed_lrs(output(0.002, 0.002))) == ["adam: config lr 0.002, the rule gives "
                                                             f"{0.001 * math.sqrt(2)!r}",
                                                             "adam: printed lr 0.002, the rule gives 0.00141421"]
    assert len(mismatches(printed_lrs(output(0.001, 0.001)))) == 4
