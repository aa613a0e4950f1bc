"""``make assess``: grade a learner's own copy of the assessment, without a hub, with the same tests.

The learner edition ships the assessment's test copy (``assessment/tests/ddp/assessment.ipynb``: the source
without solutions, WITH the hidden tests; :func:`course_lib.assessment.release.graded_copy`). :func:`merge` does what
nbgrader's autograde does before it runs a submission: every test cell and locked cell of the learner's notebook
is replaced by the test copy's (its source AND its nbgrader metadata, so editing a test, its points or its
checksum changes nothing), a deleted one is put back at the end, and the learner's answer cells are kept.
:func:`grade` runs the merged notebook in a fresh kernel in a scratch copy of the learner's folder (through
:mod:`course_lib.assessment.sandbox` when asked) and scores each test cell: all its points when it raised
nothing, none otherwise, with the error as the reason. The written answer is never scored here; its rubric is
printed. The report says the result is unproctored and ends with a self-issued completion record: date, score,
the ``machine:`` stamp and the sha256 of the notebook as graded.

Introduced in assessment/source/ddp/assessment.ipynb.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from course_lib.assessment.completion import CellResult, SelfGrade, report
from course_lib.assessment.concepts import QUESTIONS, grade_concept
from course_lib.assessment.measure import grade_measure
from course_lib.assessment.sandbox import Sandbox
from course_lib.environment.machine import stamp

__all__ = ["CellResult", "SelfGrade", "merge", "grade", "verify", "report", "main"]

#: The line the grader's own last cell prints: the learner's answers as values, for :func:`verify`.
EXPORT_PREFIX = "COURSE-GRADER-EXPORT "
EXPORTED = ("ANSWER_STEPS", "ANSWER_EPOCHS", "ANSWER_GLOBAL_BATCH", "ANSWER_ALLREDUCE_BYTES", "MEASURE_MEAN",
            "MEASURE_CI95", "MEASURE_VERDICT")
_EXPORT_CELL = (
    "import json as _course_json\n"
    "_course_values = {_k: globals().get(_k) for _k in %r}\n"
    "print(%r + _course_json.dumps({_k: _v if isinstance(_v, (int, float, str)) and not isinstance(_v, bool) "
    "else None for _k, _v in _course_values.items()}))" % (EXPORTED, EXPORT_PREFIX))


def _nbg(cell: Any) -> dict:
    return dict(cell.get("metadata", {}).get("nbgrader", {}) or {})


def _is_test(meta: dict) -> bool:
    return bool(meta.get("grade")) and not meta.get("solution")


def _is_fixed(meta: dict) -> bool:
    """A cell the learner may not change: a test cell or a locked cell (nbgrader's OverwriteCells)."""
    return _is_test(meta) or (bool(meta.get("locked")) and not meta.get("solution"))


def merge(learner_nb: Any, tests_nb: Any) -> tuple[Any, list[str]]:
    """The learner's notebook with every fixed cell restored from the test copy.

    Returns:
        ``(merged notebook, notes)``: notes say which fixed cells were changed or missing in the learner's copy.
    """
    fixed = {_nbg(c)["grade_id"]: c for c in tests_nb.cells if _is_fixed(_nbg(c))}
    answers = {_nbg(c)["grade_id"]: c for c in tests_nb.cells if _nbg(c).get("solution")}
    merged, notes, seen = copy.deepcopy(learner_nb), [], set()
    cells = []
    for cell in merged.cells:
        grade_id = _nbg(cell).get("grade_id")
        if grade_id in fixed:
            if cell.source != fixed[grade_id].source or _nbg(cell) != _nbg(fixed[grade_id]):
                notes.append(f"{grade_id}: your copy of this fixed cell was changed; graded with the original")
            restored = copy.deepcopy(fixed[grade_id])
            restored.outputs, restored.execution_count = [], None
            if grade_id in seen:
                notes.append(f"{grade_id}: a second cell claimed this test's id; it is left out")
                continue
            seen.add(grade_id)
            cells.append(restored)
        elif grade_id in answers:
            cell.metadata["nbgrader"] = copy.deepcopy(_nbg(answers[grade_id]))  # points come from the tests
            cells.append(cell)
        elif "nbgrader" in cell.get("metadata", {}):
            del cell.metadata["nbgrader"]  # an unknown grade id grades nothing
            cells.append(cell)
        else:
            cells.append(cell)
    for grade_id, cell in fixed.items():
        if grade_id not in seen:
            notes.append(f"{grade_id}: missing from your copy; put back at the end")
            restored = copy.deepcopy(cell)
            restored.outputs, restored.execution_count = [], None
            cells.append(restored)
    merged.cells = cells
    return merged, notes


def _error_of(cell: Any) -> str:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            value = str(output.get("evalue", "")).strip().splitlines()
            return f"{output.get('ename')}: {value[-1] if value else ''}"[:600]
    return ""


def _score(executed: Any, tests_nb: Any) -> SelfGrade:
    result = SelfGrade()
    points = {_nbg(c)["grade_id"]: float(_nbg(c).get("points", 0)) for c in tests_nb.cells if _nbg(c).get("grade")}
    executed_by_id = {_nbg(c).get("grade_id"): c for c in executed.cells if _nbg(c)}
    for grade_id, max_points in points.items():
        meta = _nbg(next(c for c in tests_nb.cells if _nbg(c).get("grade_id") == grade_id))
        if not _is_test(meta):
            result.manual[grade_id] = max_points
            continue
        cell = executed_by_id.get(grade_id)
        if cell is None:
            result.cells[grade_id] = CellResult(grade_id, 0, max_points, "the cell did not run")
            continue
        error = _error_of(cell)
        if not error and cell.get("execution_count") is None:
            error = "the cell did not run (an earlier cell stopped the notebook, or it timed out)"
        result.cells[grade_id] = CellResult(grade_id, 0 if error else max_points, max_points, error)
    return result


def _exported(executed: Any) -> dict[str, Any]:
    for output in (executed.cells[-1].get("outputs", []) if executed.cells else []):
        for line in str(output.get("text", "")).splitlines():
            if line.startswith(EXPORT_PREFIX):
                try:
                    return dict(json.loads(line[len(EXPORT_PREFIX):]))
                except ValueError:
                    return {}
    return {}


def verify(values: dict[str, Any], work: Path, *, code_grade: Any = None) -> dict[str, Any]:
    """The grader's own verdicts, computed OUTSIDE the submission's kernel (which may have patched anything in it:
    the checks, ``builtins``, IPython's exception handler): each concept answer and the measure answers graded from
    their values and the records left in ``work``, and the code task from ``code_grade`` (a launch of the
    submission's script by the grader: :func:`course_lib.assessment.code.grade_code`, contained when grading
    contains).

    Returns:
        ``{grade_id: Part}`` for every part it could judge.
    """
    parts: dict[str, Any] = {}
    for name in QUESTIONS:
        parts[name] = grade_concept(name, values.get("ANSWER_" + name.removeprefix("concept_").upper()))
    parts.update(grade_measure(work / "measure_runs.json", values.get("MEASURE_MEAN"), values.get("MEASURE_CI95"),
                               values.get("MEASURE_VERDICT")))
    if code_grade is not None:
        parts.update(code_grade.parts)
    return parts


def grade(notebook: Path, tests: Path, *, timeout: float = 1800, sandbox: Any = None,
          verify_outside: bool = True) -> SelfGrade:
    """Grade ``notebook`` (the learner's copy) with the tests of ``tests``.

    Args:
        notebook: The learner's notebook; its folder is copied to a scratch folder and graded there.
        tests: The test copy (:func:`course_lib.assessment.release.graded_copy`).
        timeout: Seconds per cell.
        sandbox: A :class:`course_lib.assessment.sandbox.Sandbox` to run the kernel in; ``None``: a kernel of
            this user's (self-paced: the learner grades their own work).

    Returns:
        The :class:`SelfGrade`.
    """
    raw = Path(notebook).read_bytes()
    learner_nb = nbformat.reads(raw.decode(), as_version=4)
    tests_nb = nbformat.read(str(tests), as_version=4)
    merged, notes = merge(learner_nb, tests_nb)
    export = nbformat.v4.new_code_cell(_EXPORT_CELL)
    export["id"] = "course-grader-export"
    merged.cells.append(export)
    with tempfile.TemporaryDirectory(prefix="assess-") as scratch:
        work = Path(scratch) / "work"
        shutil.copytree(Path(notebook).parent, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        if sandbox is None:
            client = NotebookClient(merged, timeout=timeout, kernel_name="python3", allow_errors=True,
                                    resources={"metadata": {"path": str(work)}})
            client.execute()
            executed = merged
        else:
            executed = sandbox.execute(merged, work, timeout=timeout)
        result = _score(executed, tests_nb)
        if verify_outside:
            _apply(result, verify(_exported(executed), work, code_grade=_outside_code_grade(work, sandbox, timeout)))
    result.digest = hashlib.sha256(raw).hexdigest()
    result.notes = notes + result.notes
    return result


def _outside_code_grade(work: Path, sandbox: Any, timeout: float) -> Any:
    """The code task graded by the grader's own launch of the script the notebook wrote (None: no script)."""
    script = work / "tape_fmnist.py"
    if sandbox is None or not script.is_file():  # self-paced: your own machine, your kernel's launch counts
        return None
    return sandbox.grade_code(script, work, timeout=timeout)


def _apply(result: SelfGrade, outside: dict[str, Any]) -> None:
    """A test cell keeps its points only if the grader's own verdict agrees (both must pass)."""
    for grade_id, part in outside.items():
        cell = result.cells.get(grade_id)
        if cell is not None and cell.points > 0 and not part.passed:
            result.cells[grade_id] = CellResult(grade_id, 0, cell.max_points,
                                                f"the grader's own check (outside your kernel): {part.reason}")
            result.notes.append(f"{grade_id}: your kernel's test passed but the grader's own check did not")


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.assessment.selfgrade [--notebook …] [--tests …]``: grade and print the report."""
    course = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description="Grade your own copy of the assessment (unproctored).")
    parser.add_argument("--notebook", type=Path, default=course / "assessment" / "ddp" / "assessment.ipynb")
    parser.add_argument("--tests", type=Path, default=course / "assessment" / "tests" / "ddp" / "assessment.ipynb")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per cell")
    parser.add_argument("--record", type=Path, default=None, help="also write the report to this file")
    parser.add_argument("--sandbox", metavar="USER", default=None,
                        help="contain the submission (root only): run it as this dedicated grading user in its own "
                        "namespaces (course_lib.assessment.sandbox), for an instructor grading learners' work")
    args = parser.parse_args(argv)
    for path, what in ((args.notebook, "your notebook"), (args.tests, "the assessment's tests")):
        if not path.is_file():
            print(f"make assess: {what} is not at {path}; "
                  + ("copy assessment/release/ddp/assessment.ipynb there and answer it"
                     if what == "your notebook" else "run make student (the learner edition ships them)"),
                  file=sys.stderr)
            return 2
    print(f"grading {args.notebook} (it runs the whole notebook: several minutes) ...", flush=True)
    box = None
    if args.sandbox:
        box = Sandbox(args.sandbox)
    result = grade(args.notebook, args.tests, timeout=args.timeout, sandbox=box)
    text = report(result, course=course, notebook=args.notebook, stamp=stamp())
    print(text)
    if args.record:
        args.record.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
