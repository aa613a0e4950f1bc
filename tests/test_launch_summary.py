"""Notebook 06's summary sentences about its runs follow from the runs' verdicts (issue 44: a sentence that states a
measured effect is printed by the code that decided it). Each verdict is flipped here and its sentence must change.
"""

from __future__ import annotations

import math
from pathlib import Path

import nbformat
import pytest

from course_lib.lessons.beyond_one_machine.checks import summary

ROOT = Path(__file__).resolve().parents[1]
ALL_TRUE = {"same weights": True, "elastic": True, "lr ratio": math.sqrt(2), "mwms resumed": True}


def test_all_shown() -> None:
    text = summary(ALL_TRUE)
    assert text.count("\n- ") == 3 and text.startswith("- ")
    assert "trained to identical weights" in text and "reached its final epoch" in text
    assert "divided by 1.4142, which is √2 (not halved" in text and "ended with the weights of" in text
    assert "NOT" not in text


@pytest.mark.parametrize("key, says", [("same weights", "did NOT end with identical weights"),
                                       ("elastic", "did NOT go through shrink"),
                                       ("mwms resumed", "did NOT end with the uninterrupted run's weights")])
def test_a_false_verdict_changes_its_sentence(key: str, says: str) -> None:
    assert says not in summary(ALL_TRUE)
    assert says in summary({**ALL_TRUE, key: False})


@pytest.mark.parametrize("ratio, says", [(2.0, "halved (the rate scales linearly"), (1.0, "divided by 1.0000"),
                                         (math.sqrt(2) * 1.001, "divided by 1.4156")])
def test_the_learning_rate_sentence_follows_the_measured_ratio(ratio: float, says: str) -> None:
    text = summary({**ALL_TRUE, "lr ratio": ratio})
    assert says in text and "√2" not in text


def test_the_notebook_prints_its_summary_from_the_verdicts() -> None:
    (path,) = sorted((ROOT / "notebooks").glob("06_*.ipynb"))
    cells = nbformat.read(path, as_version=4).cells
    calls = [c for c in cells if c.cell_type == "code" and "print(summary({" in c.source]
    assert len(calls) == 1 and all(f'"{key}"' in calls[0].source for key in ALL_TRUE)
    prose = " ".join(c.source for c in cells if c.cell_type == "markdown").lower()
    assert "halves" not in prose and "halved" not in prose   # the rate's change is printed, not asserted in prose
