"""tools/maintainers/mutants.py: every mutant still applies to the code, and the machinery kills one for real."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mutants", ROOT / "tools" / "maintainers" / "mutants.py")
mutants = importlib.util.module_from_spec(_spec)
sys.modules["mutants"] = mutants  # dataclasses look their module up
_spec.loader.exec_module(mutants)


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_exactly_once(mutant) -> None:
    mutants.check_applicable(mutant)
    assert mutant.old != mutant.new


def test_a_stale_mutant_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("a = 1\na = 1\n")
    (tmp_path / "t.py").write_text("")
    with pytest.raises(ValueError, match="occurs 2 times"):
        mutants.check_applicable(mutants.Mutant("dup", "", "x.py", "a = 1", "a = 2", ("t.py",)), tmp_path)


def test_mutant_names_are_unique_and_cover_the_issue() -> None:
    names = [m.name for m in mutants.MUTANTS]
    assert len(names) == len(set(names))
    for required in ("staleness_x7", "ring_traffic_x3", "throughput_dataset_length",
                     "every_worker_shard_0", "corrupted_pixel", "checker_near_miss"):
        assert required in names


@pytest.mark.slow
def test_the_near_miss_checker_mutant_is_killed_and_the_unmutated_copy_passes() -> None:
    by_name = {m.name: m for m in mutants.MUTANTS}
    result = mutants.run_mutant(by_name["checker_near_miss"], timeout=600)
    assert result["killed"], result
    # the control: the same machinery with a no-op "mutant" passes, so the kill is the mutant's doing
    noop = mutants.Mutant("noop", "", "course_lib/lessons/common/answers.py", "def _close(", "def _close(",
                          ("tests/test_mutant_guards.py",))
    control = mutants.run_mutant(noop, timeout=600)
    assert not control["killed"], control
