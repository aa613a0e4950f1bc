"""The notebooks' self-check cells tell right from wrong."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from course_lib.lessons.exercises import EXERCISES, check

SOLUTIONS_FILE = Path(__file__).resolve().parents[1] / "instructor" / "solutions" / "answers.py"
spec = importlib.util.spec_from_file_location("answers", SOLUTIONS_FILE)
answers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(answers)


def test_every_exercise_has_a_solution_and_wrong_answers() -> None:
    assert set(answers.SOLUTIONS) == set(EXERCISES)
    assert set(answers.WRONG) == set(EXERCISES)


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_self_check_accepts_the_solution(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(key, answers.SOLUTIONS[key]) is True
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_self_check_rejects_wrong_answers(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    for wrong in answers.WRONG[key] + ["not a number"]:
        assert check(key, wrong) is False
        assert "Hint:" in capsys.readouterr().out


def test_unanswered_and_unknown() -> None:
    assert check("00.steps", None) is False
    with pytest.raises(KeyError, match="known:"):
        check("99.nothing", 1)
