"""Tests of the bound and the distribution efficiency (course_lib.lessons.common.efficiency, course_lib.runner.multiworker.run_bound)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from course_lib.lessons.common import efficiency
from course_lib.lessons.common.paired_runs import Paired, launch_ratio
from course_lib.runner import multiworker as bound
from course_lib.training.machine.placement import PlacementError, SHARD_ENV, shard_from_env


def launch(rates: list[float], copies: int = 1):
    """A fake launch: one warm-up epoch, then ``rates`` (each copy of a bound reports rates / copies)."""
    events = [(i, {"event": "epoch", "images_per_sec": r / copies, "warmup": w})
              for i in range(copies) for r, w in [(1.0, True)] + [(r, False) for r in rates]]
    return SimpleNamespace(events=events, epochs=[e for i, e in events if i == 0])


def test_a_run_above_its_bound_says_the_bound_failed() -> None:
    """Planted: a distributed run 30 % faster than its bound in every round. The verdict must not credit it."""
    rounds = [(launch([130.0 * s, 131.0 * s]), launch([100.0 * s, 100.0 * s], copies=2)) for s in (1.0, 0.9, 1.1)]
    ratio = launch_ratio(rounds)
    line = efficiency.efficiency_line("Horovod, 2 workers", ratio)
    assert ratio.mean - ratio.ci95 > 1 and "the bound failed" in line, line


@pytest.mark.parametrize(("means", "verdict"), [
    ([0.85, 0.86, 0.84], "within its bound"),
    ([0.98, 1.03, 1.01], "within its bound"),          # 1 inside the interval: noise, not a failed bound
])
def test_a_run_within_its_bound(means: list[float], verdict: str) -> None:
    ratio = launch_ratio([(launch([100.0 * m]), launch([100.0], copies=2)) for m in means])
    assert efficiency.efficiency_line("X", ratio).endswith(verdict)


def test_one_round_cannot_tell() -> None:
    line = efficiency.efficiency_line("X", Paired(1.2, math.nan, 1, "rounds"))
    assert "cannot tell" in line and "failed" not in line


def test_the_printed_line_parses_back() -> None:
    line = efficiency.efficiency_line("Horovod, 2 workers", Paired(0.8612, 0.0487, 4, "rounds"))
    assert line == ("Horovod, 2 workers: distribution efficiency ≈0.86 ± 0.05 of its bound (95 %, 4 rounds): "
                    "within its bound")
    assert efficiency.parse_efficiency_lines(f"a\n{line}\nb") == [(0.86, 0.05)]


def test_the_shard_variable() -> None:
    assert shard_from_env({}) is None and shard_from_env({SHARD_ENV: "1/2"}) == (1, 2)
    for bad in ("2/2", "a/2", "1", "-1/2"):
        with pytest.raises(PlacementError, match="index/count"):
            shard_from_env({SHARD_ENV: bad})


def test_the_idx_loader_keeps_a_copys_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    from course_lib.training import idx_arrays

    whole = idx_arrays.load_idx_arrays(8, 4)
    monkeypatch.setenv(SHARD_ENV, "1/2")
    shard = idx_arrays.load_idx_arrays(8, 4)
    assert (shard[0] == whole[0][1::2]).all() and (shard[1] == whole[1][1::2]).all() and len(shard[2]) == 4


def test_run_bound_starts_one_copy_per_worker_each_with_its_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_run(launcher, script, script_args, workers, options):
        seen["launcher"], seen["workers"] = launcher, workers
        return "result"

    monkeypatch.setattr(bound, "run", fake_run)
    assert bound.run_bound("train.py", ["--epochs", "2"], workers=3) == "result"
    from course_lib.runner.launchers import Ranks
    specs = seen["launcher"].command(Ranks("python", 3, ("train.py", "--epochs", "2")))
    import json
    envs = [spec["env"] for spec in json.loads(specs.env["COURSE_WORKERS_SPEC"])]
    assert [env[SHARD_ENV] for env in envs] == ["0/3", "1/3", "2/3"] and seen["workers"] == 3


@pytest.mark.horovod
def test_a_real_bound_launch_runs_two_copies_each_on_its_core_and_its_shard() -> None:
    """run_bound of horovod_fmnist.py (no horovodrun: a group of 1 each): two copies, each its own core and half of
    the subset (the steps of one rank of 2 workers), their epochs summed."""
    import sys
    from pathlib import Path

    from course_lib.lessons.common.paired_runs import timed_rates
    from course_lib.training.machine.capacity import plan_workers

    script = Path(__file__).resolve().parents[1] / "source_code" / "horovod_fmnist.py"
    args = ["--batch-size", "32", "--epochs", "2", "--json", "--train-subset", "256", "--test-subset", "64"]
    result = bound.run_bound(script, args, workers=plan_workers(at_most=2).with_workers(2), timeout=300,
                             show="none", output=[].append, python=sys.executable)
    configs = {rank: e for rank, e in result.events if e["event"] == "config"}
    assert sorted(configs) == [0, 1] and all(c["workers"] == 1 for c in configs.values())
    assert all(c["samples_per_epoch"] == 128 and c["steps_per_epoch"] == 4 for c in configs.values())
    per_copy = {rank: [e["images_per_sec"] for r, e in result.events if r == rank and e["event"] == "epoch"
                       and not e["warmup"]] for rank in configs}
    assert timed_rates(result) == pytest.approx([per_copy[0][0] + per_copy[1][0]])
    from course_lib.training.machine.hardware import cpu_core_ids
    if len(cpu_core_ids()) >= 2:   # each copy on a core of its own (a rank's share)
        assert configs[0]["cpu_cores"] != configs[1]["cpu_cores"]
