"""The learner's path fits a day, and the learner's markdown holds no maintainer material (issue 45).

1. The reading-and-doing estimate (tools/maintainers/reading_time.py: 150 words a minute of markdown and code comments, 7 code
   lines a minute, 5 minutes an exercise, 20 a coding or change-the-experiment one) is at most 75 minutes per
   notebook and 6 hours for 00-06. This FAILS while the notebooks are longer (9.8 h on 2026-11-28): it is the
   issue's goal, and the notebooks are being cut to meet it.
2. No learner markdown cell (a markdown cell not tagged ``solution`` or ``instructor``; its whole source, comments
   and generated blocks included) holds a commit hash, "nbval", "sanitize", "test suite" or a load average.
3. The counting rules, on a tiny fixture notebook; each check above is shown to bite on a planted case.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tool_modules import load_tool  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


reading_time = load_tool("reading_time")
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
DAY = [path for path in NOTEBOOKS if path.name[:2] in {f"{n:02d}" for n in range(7)}]

#: What a learner's markdown must not hold: a commit hash (7-40 hex digits with a letter and a digit, as a word),
#: the harness's words, a load average ("load average 5-6", "load 3.1").
MAINTAINER = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"
                        r"|\bnbval\b|\bsanitiz\w*|\btest suite\b|\bload average\b|\bload \d+\.\d+\b", re.IGNORECASE)


def over_limits(estimates: list) -> list[str]:
    """The notebooks over 75 minutes, and the day's total when it is over 6 hours."""
    found = [f"{e.name}: {e.minutes:.0f} min (limit {reading_time.NOTEBOOK_LIMIT_MIN})" for e in estimates
             if e.minutes > reading_time.NOTEBOOK_LIMIT_MIN]
    total = sum(e.minutes for e in estimates)
    if total > reading_time.COURSE_LIMIT_MIN:
        found.append(f"00-06: {total / 60:.1f} h (limit {reading_time.COURSE_LIMIT_MIN / 60:.0f} h)")
    return found


def maintainer_material(nb: nbformat.NotebookNode) -> list[str]:
    """``c<N>: <match>`` for every maintainer word in a learner markdown cell (0-based cell positions)."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown" or set(cell.metadata.get("tags", [])) & set(reading_time.HIDDEN_TAGS):
            continue
        found += [f"c{index}: {match.group(0)!r}" for match in MAINTAINER.finditer(cell.source)]
    return found


def test_the_day_fits_the_reading_and_doing_budget() -> None:
    found = over_limits([reading_time.estimate(path) for path in DAY])
    assert not found, "over issue 45's budget (tools/maintainers/reading_time.py): " + "; ".join(found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_learner_markdown_holds_no_maintainer_material(path: Path) -> None:
    found = maintainer_material(nbformat.read(path, as_version=4))
    assert not found, (f"{path.name}: maintainer material in learner markdown (move it to instructor/notes/ or "
                       f"docs/): {found}")


def _fixture() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    solution = code("# ten words of a solution that the learner edition never shows\nx = 1\ny = 2")
    solution.metadata["tags"] = ["solution"]
    notes = md("**Exercise 9 (coding).** An instructor's note of many words, never counted.")
    notes.metadata["tags"] = ["instructor"]
    nb.cells = [
        md("# 99 · Fixture\n\nOne two three four.<!-- a hidden comment of seven words here -->\n\n"
           "<!-- run-times:begin (generated) -->\n*Reading and doing: about 5 min, many words.*\n"
           "<!-- run-times:end -->"),
        md("**Exercise 1.** Say why.\n\n**Exercise 2 (coding).** Write it.\n\n"
           "**Exercise 3 (change the experiment).** Vary it.\n\n**Exercise 4 (code).** Code it.\n\n"
           "**Exercise 5 (by hand).** Count."),
        code("# three comment words\nimport os\n\nx = os.sep  # two more\n%time y = 1\n"),  # 5 words, 3 lines
        solution, notes]
    return nb


def test_the_counting_rules() -> None:
    estimate = reading_time.estimate_notebook(_fixture(), "99_fixture")
    exercise_words = len("**Exercise 1.** Say why. **Exercise 2 (coding).** Write it. **Exercise 3 (change the "
                         "experiment).** Vary it. **Exercise 4 (code).** Code it. **Exercise 5 (by hand).** Count."
                         .split())
    # markdown: "# 99 · Fixture One two three four." (comment and generated block not read) + the exercises cell;
    # code comments: "three comment words" and the inline "two more"; the solution and instructor cells: nothing.
    assert estimate.words == 8 + exercise_words + 5     # "#", "99", "·" and "four." are words too
    assert estimate.code_lines == 3                       # import, the assignment, the magic; no blank, no comment
    assert (estimate.exercises, estimate.big_exercises) == (2, 3)    # 1 and "by hand": 5 min; coding/experiment/code: 20
    assert estimate.minutes == pytest.approx(estimate.words / 150 + 3 / 7 + 2 * 5 + 3 * 20)
    assert reading_time.minutes_text(47.6) == "about 50 min" and reading_time.minutes_text(95) == "about 1 h 35 min"
    assert reading_time.minutes_text(120) == "about 2 h" and reading_time.minutes_text(1) == "about 5 min"


def test_the_budget_check_bites() -> None:
    est = reading_time.Estimate
    assert over_limits([est(f"0{n}_a", 150 * 50, 0, 0, 0) for n in range(7)]) == []        # 350 min, none > 75
    assert over_limits([est("02_long", 150 * 76, 0, 0, 0)]) == ["02_long: 76 min (limit 75)"]
    assert over_limits([est(f"0{n}_a", 150 * 70, 0, 0, 0) for n in range(7)]) == ["00-06: 8.2 h (limit 6 h)"]


@pytest.mark.parametrize("planted", ["until commit 11f149b, eight epochs", "at commit `36af550`",
                                     "the nbval run masks it", "nbval's sanitize file", "the test suite compares",
                                     "(2026-11-26, load average 5-6)", "a pilot at load 3.1 showed",
                                     "sanitized outputs"])
def test_the_maintainer_scan_bites(planted: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"Some text, {planted}, and more.")]
    assert maintainer_material(nb), planted
    hidden = nbformat.v4.new_markdown_cell(planted)
    hidden.metadata["tags"] = ["instructor"]
    nb.cells = [hidden, nbformat.v4.new_code_cell(f"# {planted}")]
    assert maintainer_material(nb) == [], "instructor cells and code are not learner markdown"


@pytest.mark.parametrize("clean", ["Train for 8 epochs on 1536 images of 28x28 pixels.", "The colour #1f77b4.",
                                   "Load 1500 images and a 64 MiB buffer: 2.70 GB/s.", "deadbeef cafe face",
                                   "2026-11-28 at 14:02", "seed 1234567 and 7654321"])
def test_the_maintainer_scan_leaves_learner_text_alone(clean: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(clean)]
    assert maintainer_material(nb) == [], clean
