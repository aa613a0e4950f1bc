"""course_lib.training.epochs speaks one vocabulary, EpochPlan's (issue 54, item 4).

Before, its free functions took ``n``, ``batch_size`` and ``num_workers`` beside the plan's ``train_size``,
``per_worker_batch`` and ``workers``, and ``describe_epoch`` repeated ``EpochPlan.describe`` with no caller. The
arithmetic itself is tests/test_scripts.py::test_epoch_arithmetic's and tests/test_data.py's.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from course_lib.training import epochs

#: EpochPlan's fields: the only parameter names the module's public functions and classes may take.
PLAN_WORDS = {"train_size", "per_worker_batch", "workers", "backward_passes_per_step", "one_reader"}


def vocabulary_problems(source: str) -> list[str]:
    """Public functions of ``source`` (a module's text) whose parameters are not the plan's words."""
    problems = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and node.name != "check_counts":
            names = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            if set(names) - PLAN_WORDS:
                problems.append(f"{node.name}({', '.join(names)}): {sorted(set(names) - PLAN_WORDS)} are not "
                                "EpochPlan's words")
    return problems


def test_every_public_function_takes_the_plans_words() -> None:
    assert vocabulary_problems(inspect.getsource(epochs)) == []
    assert set(inspect.signature(epochs.EpochPlan).parameters) == PLAN_WORDS


def test_a_second_vocabulary_fails_it() -> None:
    planted = inspect.getsource(epochs).replace("def shard_size(train_size: int, workers: int)",
                                                "def shard_size(n: int, num_workers: int)")
    assert planted != inspect.getsource(epochs)
    assert vocabulary_problems(planted) == ["shard_size(n, num_workers): ['n', 'num_workers'] are not EpochPlan's words"]


def test_no_function_repeats_the_plan() -> None:
    """The plan's description and numbers have one home each (``describe_epoch`` had no caller and is gone);
    ``epoch_arithmetic`` stays only as the dict notebook 04 and the exercises' solvers read."""
    assert not hasattr(epochs, "describe_epoch")
    assert epochs.epoch_arithmetic(1_000, 64, 3) == epochs.EpochPlan(1_000, 64, 3).as_dict()
    root = Path(__file__).resolve().parents[1]
    readers = sorted(p.relative_to(root).as_posix() for folder in ("course_lib", "source_code", "notebooks")
                     for p in (root / folder).rglob("*.*") if p.suffix in {".py", ".ipynb"}
                     and "epoch_arithmetic" in p.read_text(encoding="utf-8") and p.name != "epochs.py")
    assert readers == ["course_lib/lessons/common/answers.py", "notebooks/04_large_batch.ipynb"], readers


@pytest.mark.parametrize("call, words", [
    (lambda: epochs.EpochPlan(60_000, 0, 2), "per_worker_batch must be an int >= 1, got 0"),
    (lambda: epochs.EpochPlan(60_000, 64, 0), "workers must be an int >= 1, got 0"),
    (lambda: epochs.steps_per_epoch(60_000, 64, 0), "workers must be an int >= 1, got 0"),
    (lambda: epochs.steps_per_epoch(60_000, True), "per_worker_batch must be an int >= 1, got True"),
])
def test_errors_name_the_plans_words(call, words) -> None:
    with pytest.raises(epochs.ShardError, match=words):
        call()
