"""How long a learner needs to read and do each notebook, estimated from its text (issue 45).

Usage::

    .venv/bin/python tools/maintainers/reading_time.py            # a table: words, code lines, exercises, minutes per notebook

The same estimate is shown beside the machine time in each notebook's intro line and in the README's and the
instructor guide's tables (tools/maintainers/run_times.py); tests/test_reading_time.py holds 00-06 to issue 45's budget.

The rates (issue 45): 150 words a minute of markdown and code comments, 7 code lines a minute, 5 minutes an
exercise and 20 a coding or change-the-experiment one. The estimate counts what the learner edition shows: cells
tagged ``solution`` or ``instructor`` are left out (tools/student.py removes them), and so are ``<!-- ... -->``
comments and the generated blocks between ``<!-- NAME:begin ... -->`` and ``<!-- NAME:end -->`` markers (the
run-time line that tools/maintainers/run_times.py writes into each intro cell, with this estimate, is not counted in it). An exercise is a ``**Exercise N.**`` in markdown; one
written ``**Exercise N (coding).**``, ``(code)``, ``(change the experiment)`` or ``(change the analysis)`` counts 20
minutes. Machine time (the run times) is not part of it.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 7
EXERCISE_MINUTES = 5
BIG_EXERCISE_MINUTES = 20
#: The limits of issue 45: no notebook over 75 minutes, 00-06 at most 6 hours.
NOTEBOOK_LIMIT_MIN = 75
COURSE_LIMIT_MIN = 6 * 60
HIDDEN_TAGS = ("solution", "instructor")
EXERCISE = re.compile(r"\*\*Exercise \d+(?: \(([^)]*)\))?\.\*\*")
BIG_KINDS = ("coding", "code", "change the experiment", "change the analysis")
COMMENT_BLOCK = re.compile(r"<!--.*?-->", re.S)
GENERATED_BLOCK = re.compile(r"<!-- ([\w-]+):begin.*?-->.*?<!-- \1:end -->", re.S)


@dataclass(frozen=True)
class Estimate:
    """One notebook's counts and minutes."""

    name: str
    words: int          # markdown words plus code-comment words
    code_lines: int     # non-blank code lines that are not only a comment
    exercises: int      # short exercises (5 min)
    big_exercises: int  # coding or change-the-experiment exercises (20 min)

    @property
    def minutes(self) -> float:
        return (self.words / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE
                + EXERCISE_MINUTES * self.exercises + BIG_EXERCISE_MINUTES * self.big_exercises)


def _code_counts(source: str) -> tuple[int, int]:
    """(comment words, code lines) of one code cell; IPython magics count as code lines."""
    words = lines = 0
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            words += len(stripped.lstrip("#").split())
        else:
            lines += 1
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and token.line.strip() != token.string.strip():
                words += len(token.string.lstrip("#").split())   # a comment after code on the same line
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass   # a cell with magics or an unfinished learner stub: its full-line comments are counted above
    return words, lines


def estimate(path: Path) -> Estimate:
    """The counts of the notebook at ``path``, as the learner edition shows it."""
    return estimate_notebook(nbformat.read(path, as_version=4), path.stem)


def learner_markdown(cell: nbformat.NotebookNode) -> str | None:
    """A markdown cell's text as a learner reads it (no comments, no generated block); None for other cells and
    for cells tagged ``solution`` or ``instructor``."""
    if cell.cell_type != "markdown" or any(tag in cell.get("metadata", {}).get("tags", []) for tag in HIDDEN_TAGS):
        return None
    return COMMENT_BLOCK.sub("", GENERATED_BLOCK.sub("", cell.source))


def estimate_notebook(nb: nbformat.NotebookNode, name: str) -> Estimate:
    """The counts of a notebook already read (``name`` labels the result)."""
    words = lines = short = big = 0
    for cell in nb.cells:
        if any(tag in cell.get("metadata", {}).get("tags", []) for tag in HIDDEN_TAGS):
            continue
        if cell.cell_type == "markdown":
            text = learner_markdown(cell) or ""
            words += len(text.split())
            for match in EXERCISE.finditer(text):
                kind = (match.group(1) or "").strip().lower()
                if kind in BIG_KINDS:
                    big += 1
                else:
                    short += 1
        elif cell.cell_type == "code":
            w, n = _code_counts(cell.source)
            words += w
            lines += n
    return Estimate(name, words, lines, short, big)


def course(root: Path = ROOT) -> list[Estimate]:
    """Every ``notebooks/NN_*.ipynb``, in order."""
    return [estimate(path) for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


def minutes_text(minutes: float) -> str:
    """``47.6`` -> ``"about 50 min"``; ``95`` -> ``"about 1 h 35 min"`` (rounded to 5 minutes)."""
    rounded = max(5, int(5 * round(minutes / 5)))
    hours, rest = divmod(rounded, 60)
    return f"about {hours} h {rest} min" if hours and rest else f"about {hours} h" if hours else f"about {rest} min"


def main(argv: list[str] | None = None) -> int:
    rows = course()
    print(f"{'notebook':32} {'words':>6} {'code':>5} {'ex':>3} {'big':>3} {'min':>6}")
    for row in rows:
        flag = "  > limit" if row.minutes > NOTEBOOK_LIMIT_MIN else ""
        print(f"{row.name:32} {row.words:6d} {row.code_lines:5d} {row.exercises:3d} {row.big_exercises:3d} "
              f"{row.minutes:6.1f}{flag}")
    day = [row for row in rows if row.name[:2] in {f"{n:02d}" for n in range(7)}]
    for label, group in (("00-06", day), ("all", rows)):
        total = sum(row.minutes for row in group)
        print(f"{label:32} {'':6} {'':5} {'':3} {'':3} {total:6.1f}  ({total / 60:.2f} h"
              + (f"; limit {COURSE_LIMIT_MIN / 60:.0f} h, {NOTEBOOK_LIMIT_MIN} min a notebook)" if group is day else ")"))
        if len(day) == len(rows):
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
