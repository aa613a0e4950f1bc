"""Notebook 04's coding exercise (``04.lr_schedule``): the checker accepts the instructor's solution, rejects the
typical wrong schedules with the hint that names the mistake, and treats the placeholder as "not attempted yet"."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from course_lib.lessons.large_batch import checks as large_batch
from course_lib.lessons.large_batch.checks import check_lr_schedule

ROOT = Path(__file__).resolve().parents[1]
SOLUTION_FILE = ROOT / "instructor" / "solutions" / "lr_schedule.py"
NOTEBOOK = ROOT / "notebooks" / "04_large_batch.ipynb"


def _solution():
    spec = importlib.util.spec_from_file_location("lr_schedule_solution", SOLUTION_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.learning_rate


def _ramp(update: int, warmup: int, shift: int = 1) -> float:
    return min(update + shift, warmup) / warmup if warmup else 1.0


WRONG = {
    "no scaling": (lambda u, *, base_lr, base_batch, batch, warmup_updates: base_lr, "never grows"),
    "no warm-up": (lambda u, *, base_lr, base_batch, batch, warmup_updates: base_lr * batch / base_batch,
                   "must not jump"),
    "sqrt scaling": (lambda u, *, base_lr, base_batch, batch, warmup_updates:
                     base_lr + (base_lr * math.sqrt(batch / base_batch) - base_lr) * _ramp(u, warmup_updates),
                     "not by the square root"),
    "ramp from zero": (lambda u, *, base_lr, base_batch, batch, warmup_updates:
                       base_lr * batch / base_batch * _ramp(u, warmup_updates), "not from 0"),
    "off by one": (lambda u, *, base_lr, base_batch, batch, warmup_updates:
                   base_lr + (base_lr * batch / base_batch - base_lr) * _ramp(u, warmup_updates, shift=0),
                   "update 0 is the first update"),
}


def test_checker_accepts_the_solution(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_lr_schedule(_solution()) is True
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("mistake", sorted(WRONG))
def test_checker_rejects_typical_mistakes_with_their_hint(mistake: str, capsys: pytest.CaptureFixture[str]) -> None:
    function, hint = WRONG[mistake]
    assert check_lr_schedule(function) is False
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out, out


def test_placeholder_is_not_attempted_and_errors_do_not_crash(capsys: pytest.CaptureFixture[str]) -> None:
    def placeholder(update, *, base_lr, base_batch, batch, warmup_updates):
        raise NotImplementedError("write my_learning_rate")

    assert check_lr_schedule(placeholder) is False
    assert "not attempted yet" in capsys.readouterr().out
    assert check_lr_schedule(lambda u, **kw: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert check_lr_schedule(lambda u, **kw: "fast") is False
    assert "return a number" in capsys.readouterr().out


def test_reference_is_the_schedule_the_runs_use() -> None:
    """The checker's reference is course_lib's TF schedule, not a copy: at the ramp's end it is the peak."""
    assert large_batch.reference_rate(3, base_lr=0.01, base_batch=32, batch=256, warmup_updates=4) == \
        pytest.approx(0.08)
    assert large_batch.reference_rate(0, base_lr=0.01, base_batch=32, batch=256, warmup_updates=4) == \
        pytest.approx(0.01 + 0.07 / 4)
    assert large_batch.reference_rate(5, base_lr=0.05, base_batch=64, batch=512, warmup_updates=0) == \
        pytest.approx(0.4)


def test_committed_notebook_holds_the_placeholder_and_a_tagged_solution() -> None:
    """The learner's cell is the placeholder; the worked answer is a `solution` cell (make student removes it),
    and the self-check after it shows the solved state in the course's own outputs."""
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "def my_learning_rate" in c.source]
    learner = [c for c in cells if "solution" not in c.metadata.get("tags", [])]
    solution = [c for c in cells if "solution" in c.metadata.get("tags", [])]
    assert len(learner) == 1 and "raise NotImplementedError" in learner[0].source
    assert len(solution) == 1 and "NotImplementedError" not in solution[0].source
    checks = [c for c in nb.cells if c.cell_type == "code" and "check_lr_schedule(my_learning_rate)" in c.source]
    assert len(checks) == 1
    shown = "".join(o.get("text", "") for o in checks[0].get("outputs", []))
    assert "[04.lr_schedule] correct" in shown, shown
