"""The assessment's learner copies, made the way nbgrader's ``generate_assignment`` makes them.

:func:`release` is what a learner edits: every ``### BEGIN SOLUTION`` … ``### END SOLUTION`` region replaced by
nbgrader's stub (a markdown solution cell by its text stub), every ``### BEGIN HIDDEN TESTS`` … ``### END HIDDEN
TESTS`` region removed, outputs cleared. :func:`graded_copy` keeps the hidden tests (and strips the solutions): the
course is public, so ``make assess`` ships it and grades with it ("hidden" means hidden from the released
notebook). ``tests/test_assessment.py`` checks :func:`release` against nbgrader's own output where nbgrader is
installed.

Introduced in assessment/source/ddp/assessment.ipynb.
"""

from __future__ import annotations

import copy
import re
from typing import Any

__all__ = ["CODE_STUB", "TEXT_STUB", "release", "graded_copy"]

CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
TEXT_STUB = "YOUR ANSWER HERE"
_SOLUTION = re.compile(r"^([ \t]*)#+\s*BEGIN SOLUTION\s*\n.*?^[ \t]*#+\s*END SOLUTION[ \t]*$", re.S | re.M)
_HIDDEN = re.compile(r"^[ \t]*#+\s*BEGIN HIDDEN TESTS\s*\n.*?^[ \t]*#+\s*END HIDDEN TESTS[ \t]*\n?", re.S | re.M)


def _strip_solutions(cell: Any) -> None:
    source = cell.source
    if cell.cell_type == "markdown":
        if _SOLUTION.search(source):
            cell.source = TEXT_STUB
        return
    cell.source = _SOLUTION.sub(lambda m: "\n".join(m.group(1) + line for line in CODE_STUB.splitlines()), source)


def _clean(nb: Any) -> Any:
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        _strip_solutions(cell)
    return out


def graded_copy(source_nb: Any) -> Any:
    """The source notebook without its solutions, with its hidden tests: what ``make assess`` grades with."""
    return _clean(source_nb)


def release(source_nb: Any) -> Any:
    """The learner's notebook: no solutions, no hidden tests, no outputs."""
    out = _clean(source_nb)
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.source = _HIDDEN.sub("", cell.source).rstrip("\n")
    return out
