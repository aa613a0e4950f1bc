"""Keep the committed notebooks clean: executed, error-free, normalised, no machine-specific paths.

nbval (run by `make test` over notebooks/) checks that the outputs still come out the same; this test
checks what nbval does not: that there ARE outputs to compare, and that the files follow the skeleton.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REQUIRED = ["00_setup", "01_data_parallelism", "02_mirrored_strategy", "03_horovod"]
HEADINGS = ["## Setup", "## Summary", "## Exercises"]
# Absolute paths or user names that would tie an output to one machine.
MACHINE_SPECIFIC = re.compile(r"(/home/\w+|/root/|/Users/\w+|/work/\w+|/tmp/\w+|C:\\\\Users)")


def _outputs_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            if output.get("name") == "stdout":
                parts.append(output.get("text", ""))
        else:
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/"):
                    parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def test_the_course_notebooks_exist() -> None:
    names = [path.stem for path in NOTEBOOKS]
    for name in REQUIRED:
        assert name in names, f"notebooks/{name}.ipynb is missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_clean(path: Path) -> None:
    text = path.read_text()
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert text == nbformat.writes(nb) + "\n", "not normalised: run `make notebooks`"

    ids = [cell.get("id") for cell in nb.cells]
    assert all(ids) and len(set(ids)) == len(ids), "cell ids must be present and unique"

    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code, "a notebook without code"
    for index, cell in enumerate(code):
        assert cell.execution_count is not None, f"code cell {index} was not executed: run `make notebooks`"
        for output in cell.outputs:
            assert output.output_type != "error", f"code cell {index} has an error output"
        leaked = MACHINE_SPECIFIC.findall(_outputs_text(cell))
        assert not leaked, f"code cell {index} shows machine-specific paths: {leaked}"
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), "cells must have been executed top to bottom, once"
    assert sum(bool(cell.outputs) for cell in code) >= len(code) // 2, "most code cells should show something"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_follows_the_skeleton(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), "first cell: title"
    assert "you will" in first.source.lower(), "first cell: say what the learner will be able to do"
    markdown = [cell.source for cell in nb.cells if cell.cell_type == "markdown"]
    positions = []
    for heading in HEADINGS:
        found = [i for i, source in enumerate(markdown) if source.startswith(heading)]
        assert found, f"missing heading {heading!r}"
        positions.append(found[0])
    assert positions == sorted(positions), "Setup, Summary, Exercises must come in this order"
    start = next(i for i, cell in enumerate(nb.cells)
                 if cell.cell_type == "markdown" and cell.source.startswith("## Exercises"))
    self_checks = [cell for cell in nb.cells[start:]
                   if cell.cell_type == "code" and re.search(r"\bcheck\w*\(", cell.source)]
    assert self_checks, "each exercise needs a self-check cell (answers.check or a check_... of its topic's checks)"


FIGURE_TEXT = re.compile(r"<(?:matplotlib\.figure\.)?Figure[ :]")


def figures_without_images(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of code cells that made a figure but show no ``image/png`` (a bare Figure's repr)."""
    bad = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        bundles = [output.get("data", {}) for output in cell.get("outputs", [])]
        has_image = any("image/png" in data for data in bundles)
        mentions = any(FIGURE_TEXT.search(data.get("text/plain", "") if isinstance(data.get("text/plain", ""), str)
                                          else "".join(data.get("text/plain", [])))
                       for data in bundles)
        plots = re.search(r"\bplot_\w+\(|show_figure\(|plt\.show\(", cell.source) is not None
        if (mentions or plots) and not has_image:
            bad.append(index)
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_figure_is_an_image(path: Path) -> None:
    bad = figures_without_images(nbformat.read(path, as_version=4))
    assert not bad, (f"cells {bad} make a figure but their output holds no image/png (only its text "
                     "'<Figure size ...>'): display it with course_lib.lessons.common.display.show_figure(fig) "
                     "or plt.show(), then re-execute the notebook")


def test_the_figure_check_can_fail() -> None:
    nb = nbformat.v4.new_notebook()
    bare = nbformat.v4.new_code_cell("scaling.plot_scaling(table)", outputs=[
        nbformat.v4.new_output("execute_result", data={"text/plain": "<Figure size 1000x400 with 2 Axes>"},
                               execution_count=1)])
    shown = nbformat.v4.new_code_cell("show_figure(fig)", outputs=[
        nbformat.v4.new_output("display_data", data={"text/plain": "<Figure: x>", "image/png": "iVBOR"})])
    silent = nbformat.v4.new_code_cell("show_figure(fig)", outputs=[])
    nb.cells = [bare, shown, silent]
    assert figures_without_images(nb) == [0, 2]
