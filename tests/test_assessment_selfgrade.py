"""``make assess``'s grader (issue 55, item 3) on small notebooks: what nbgrader's autograde does before it runs a
submission (fixed cells restored from the test copy, points from the test copy), each test cell scored, the report.

The real assessment graded end to end in the learner edition is tests/test_assessment_launch.py's last test.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import nbformat
import pytest

from course_lib.assessment import selfgrade

ROOT = Path(__file__).resolve().parents[1]


def _cell(source: str, grade_id: str | None = None, **kind) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "schema_version": 3, "grade": False, "solution": False,
                                     "locked": False, **kind}
    return cell


def _tests_nb() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [_cell("BASE = 3", "setup", locked=True),
                _cell("# YOUR CODE HERE\nraise NotImplementedError()", "answer_a", solution=True),
                _cell("assert ANSWER_A == BASE * 2, 'ANSWER_A is not twice BASE'", "test_a", grade=True, locked=True,
                      points=5),
                _cell("# YOUR CODE HERE\nraise NotImplementedError()", "answer_b", solution=True),
                _cell("assert ANSWER_B == 7", "test_b", grade=True, locked=True, points=3)]
    return nb


def _learner(a: str, b: str) -> nbformat.NotebookNode:
    nb = _tests_nb()
    nb.cells[1].source, nb.cells[3].source = a, b
    for index in (2, 4):
        nb.cells[index].source = "# hidden tests"
    return nb


def _grade(tmp_path: Path, learner: nbformat.NotebookNode) -> selfgrade.SelfGrade:
    (tmp_path / "me").mkdir()
    nbformat.write(learner, tmp_path / "me" / "nb.ipynb")
    nbformat.write(_tests_nb(), tmp_path / "tests.ipynb")
    return selfgrade.grade(tmp_path / "me" / "nb.ipynb", tmp_path / "tests.ipynb", timeout=60)


def test_right_and_wrong_answers_score_their_cells(tmp_path: Path) -> None:
    result = _grade(tmp_path, _learner("ANSWER_A = 6", "ANSWER_B = 8"))
    assert (result.cells["test_a"].points, result.cells["test_b"].points) == (5, 0)
    assert result.score == 5 and result.max_score == 8
    assert "AssertionError" in result.cells["test_b"].reason


def test_editing_a_test_cell_or_its_points_changes_nothing(tmp_path: Path) -> None:
    learner = _learner("ANSWER_A = 1", "ANSWER_B = 7")
    learner.cells[2].source = "pass  # my own 'test'"
    learner.cells[2].metadata["nbgrader"]["points"] = 500
    learner.cells[4].metadata["nbgrader"]["checksum"] = "forged"
    result = _grade(tmp_path, learner)
    assert result.cells["test_a"].points == 0 and result.max_score == 8
    assert any("test_a" in note and "changed" in note for note in result.notes)


def test_a_deleted_test_cell_is_put_back_and_run(tmp_path: Path) -> None:
    learner = _learner("ANSWER_A = 6", "ANSWER_B = 1")
    del learner.cells[4]
    result = _grade(tmp_path, learner)
    assert result.cells["test_b"].points == 0 and "AssertionError" in result.cells["test_b"].reason
    assert any("test_b" in note and "missing" in note for note in result.notes)


def test_a_second_cell_claiming_a_tests_id_is_left_out(tmp_path: Path) -> None:
    learner = _learner("ANSWER_A = 6", "ANSWER_B = 1")
    forged = _cell("pass", "test_b", grade=True, locked=True, points=3)
    learner.cells.insert(0, forged)
    result = _grade(tmp_path, learner)
    assert result.cells["test_b"].points == 0


def test_report_says_unproctored_and_writes_a_self_issued_record(tmp_path: Path) -> None:
    result = _grade(tmp_path, _learner("ANSWER_A = 6", "ANSWER_B = 8"))
    result.manual["written_answer"] = 20
    text = selfgrade.report(result, course=ROOT, notebook=Path("nb.ipynb"), stamp="machine: test box",
                            today=datetime.date(2026, 12, 2))
    assert text.startswith("UNPROCTORED")
    assert "score: 5 / 8 autograded points" in text and "test_b (0 of 3): AssertionError" in text
    assert "NOT SCORED" in text and "| criterion | points |" in text and "Instructors only" not in text
    record = json.loads(text.split("not a certificate):\n", 1)[1])
    assert record["date"] == "2026-12-02" and record["machine"] == "machine: test box"
    assert record["notebook_sha256"] == result.digest and len(result.digest) == 64
    assert "NOT a certificate" in record["record"]


def test_missing_notebook_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert selfgrade.main(["--notebook", str(tmp_path / "none.ipynb")]) == 2
    assert "copy assessment" in capsys.readouterr().err


def _concept_tests_nb() -> nbformat.NotebookNode:
    nb = _tests_nb()
    nb.cells = [_cell("# YOUR CODE HERE\nraise NotImplementedError()", "answer_epochs", solution=True),
                _cell("from course_lib.assessment.code import assert_part\n"
                      "from course_lib.assessment.concepts import grade_concept\n"
                      "assert_part(grade_concept('concept_epochs', ANSWER_EPOCHS), 'concept_epochs')",
                      "concept_epochs", grade=True, locked=True, points=5)]
    return nb


@pytest.mark.parametrize("patch", [
    "get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)",  # IPython swallows every error
    "import course_lib.assessment.code as c\nc.assert_part = lambda *args: None",     # the check itself replaced
    "import builtins\n_real = builtins.__import__\n"                                   # builtins: a fake module
    "def _fake(name, *a, _real=_real, **k):\n    m = _real(name, *a, **k)\n"
    "    if name == 'course_lib.assessment.code': m.assert_part = lambda *args: None\n    return m\n"
    "builtins.__import__ = _fake"])
@pytest.mark.parametrize("outside", [True, False])
def test_monkeypatching_the_checks_is_caught_by_the_graders_own_check(tmp_path: Path, patch: str,
                                                                      outside: bool) -> None:
    """Inside its kernel a submission can silence any test; the grader's own verdict, computed outside the
    kernel from the exported answer, is what counts (``outside=False`` shows the patch fools the kernel's test)."""
    tests = _concept_tests_nb()
    learner = _concept_tests_nb()
    learner.cells[0].source = f"ANSWER_EPOCHS = 3  # epochs divided by the workers\n{patch}"
    learner.cells[1].source = "# hidden tests"
    (tmp_path / "me").mkdir()
    nbformat.write(learner, tmp_path / "me" / "nb.ipynb")
    nbformat.write(tests, tmp_path / "tests.ipynb")
    result = selfgrade.grade(tmp_path / "me" / "nb.ipynb", tmp_path / "tests.ipynb", timeout=60,
                             verify_outside=outside)
    if outside:
        assert result.cells["concept_epochs"].points == 0
        assert "dividing epochs" in result.cells["concept_epochs"].reason
    else:
        assert result.cells["concept_epochs"].points == 5  # fooled: the reason the grader checks outside


def test_the_report_and_the_result_live_in_completion() -> None:
    """make assess's printout and the graded attempt have one home (course_lib.assessment.completion)."""
    from course_lib.assessment import completion

    assert selfgrade.report is completion.report and selfgrade.SelfGrade is completion.SelfGrade
    result = completion.SelfGrade(cells={"a": completion.CellResult("a", 1.0, 2.0, "half")})
    assert (result.score, result.max_score) == (1.0, 2.0)
