"""What a self-graded attempt came to (:class:`SelfGrade`) and what ``make assess`` prints: unproctored, the score, each part missed and why, the rubric, a completion record.

The record (date, score, the ``machine:`` stamp, the sha256 of the graded notebook) is self-issued and says so: it
is not a certificate. The written answer is not scored here; its rubric (without its instructors-only part) is
shown for the learner to judge their own answer.

Introduced in assessment/source/ddp/assessment.ipynb (``make assess``).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from dataclasses import dataclass, field

from course_lib.assessment import spec

__all__ = ["CellResult", "SelfGrade", "report"]


@dataclass
class CellResult:
    """One test cell's outcome."""

    grade_id: str
    points: float
    max_points: float
    reason: str = ""


@dataclass
class SelfGrade:
    """Every test cell's outcome, the written answer's points (not scored), and the graded notebook's digest."""

    cells: dict[str, CellResult] = field(default_factory=dict)
    manual: dict[str, float] = field(default_factory=dict)
    digest: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(c.points for c in self.cells.values())

    @property
    def max_score(self) -> float:
        return sum(c.max_points for c in self.cells.values())


def _rubric(course: Path) -> str:
    for path in (course / "assessment" / "rubric.md", course / "instructor" / "assessment" / "rubric.md"):
        if path.is_file():
            text = path.read_text()
            return text.split("\n## Instructors only", 1)[0].strip()
    return "(no rubric found)"


def report(result: SelfGrade, *, course: Path, notebook: Path, stamp: str, today: _dt.date | None = None) -> str:
    """The text ``make assess`` prints: unproctored, score, parts missed and why, the rubric, the record."""
    auto_total = result.max_score
    pass_mark = round(spec.PASS_MARK * auto_total / sum(spec.POINTS.values()))
    passed = result.score >= pass_mark
    lines = ["UNPROCTORED SELF-ASSESSMENT: this grade was not proctored; nobody watched the work being done.",
             f"notebook: {notebook}", ""]
    lines += [f"score: {result.score:g} / {auto_total:g} autograded points (pass mark {pass_mark}): "
              f"{'PASS' if passed else 'NOT YET'}", ""]
    missed = [c for c in result.cells.values() if c.points < c.max_points]
    lines.append("parts missed:" if missed else "parts missed: none")
    lines += [f"  - {c.grade_id} (0 of {c.max_points:g}): {c.reason}" for c in missed]
    for note in result.notes:
        lines.append(f"  note: {note}")
    for grade_id, points in result.manual.items():
        lines += ["", f"{grade_id} ({points:g} points): NOT SCORED here (an instructor grades it). Judge your answer "
                  "against the rubric:", _rubric(course)]
    record = {"record": "self-issued completion record (NOT a certificate: unproctored, self-graded)",
              "date": (today or _dt.date.today()).isoformat(),
              "score": f"{result.score:g}/{auto_total:g} autograded", "result": "pass" if passed else "not yet",
              "machine": stamp, "notebook_sha256": result.digest}
    lines += ["", "completion record (self-issued, not a certificate):", json.dumps(record, indent=1)]
    return "\n".join(lines)
