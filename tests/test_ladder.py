"""Tests of course_lib.lessons.large_batch.ladder: a ladder's configurations and the changes derived from their
flags."""

from __future__ import annotations

import subprocess
import sys

import pytest

from course_lib.lessons.large_batch import ladder
from course_lib.lessons.large_batch.ladder import Config

LADDER = [
    Config("baseline", {"--batch-size": 32, "--lr": 0.001}),
    Config("naive 8x", {"--batch-size": 32, "--lr": 0.001, "--backward-passes-per-step": 8},
           parent="baseline"),
    Config("+ LR scaling", {"--batch-size": 32, "--lr": 0.001, "--backward-passes-per-step": 8,
                            "--scale-lr": True}, parent="naive 8x"),
    Config("2 workers", {"--batch-size": 32, "--lr": 0.001, "--backward-passes-per-step": 4,
                         "--scale-lr": False}, parent="naive 8x", workers=2),
]


def test_config_args_switches_and_values() -> None:
    config = Config("x", {"--lr": 0.5, "--scale-lr": True, "--plateau": False, "--seed": None})
    assert config.args() == ["--lr", "0.5", "--scale-lr"]


def test_changes_come_from_the_flags() -> None:
    diff = ladder.changes(LADDER)
    assert diff["baseline"] == ["baseline"]
    assert diff["naive 8x"] == ["+--backward-passes-per-step 8"]
    assert diff["+ LR scaling"] == ["+--scale-lr"]
    assert diff["2 workers"] == ["--backward-passes-per-step 8 -> 4", "workers 1 -> 2"]
    lamb = Config("LAMB", {**LADDER[2].flags, "--optimizer": "lamb"}, parent="+ LR scaling")
    assert ladder.changes([*LADDER, lamb])["LAMB"] == ["+--optimizer lamb"]
    unscaled = Config("off", {**LADDER[2].flags, "--scale-lr": False}, parent="+ LR scaling")
    assert ladder.changes([*LADDER, unscaled])["off"] == ["---scale-lr"]


def test_changes_rejects_bad_ladders() -> None:
    with pytest.raises(ValueError, match="not an earlier configuration"):
        ladder.changes([Config("b", parent="a"), Config("a")])
    with pytest.raises(ValueError, match="named 'a'"):
        ladder.changes([Config("a"), Config("a")])


def test_import_does_not_start_tensorflow() -> None:
    code = "import sys, course_lib.lessons.large_batch.ladder; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
