"""Sentences of the course that must agree with the course (issue 30, item 5: coherence).

- No notebook claims the course has five notebooks (it has seven).
- Wherever the notebooks, the README or the docs cite "the reference bootcamp", the same paragraph names and
  links it: OpenHackathons' "Introduction to Distributed Deep Learning" (gpubootcamp, archived).
- The measured sign ``≈`` is explained once, up front, as "measured, not approximately" (notebook 00).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BOOTCAMP_URL = "https://github.com/openhackathons-org/gpubootcamp/tree/master/ai/Distributed_Deep_Learning"


def paragraphs(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    else:
        texts = [path.read_text()]
    return [p for text in texts for p in re.split(r"\n\s*\n", text)]


def uncited_bootcamp(path: Path) -> list[str]:
    return [" ".join(p.split())[:160] for p in paragraphs(path)
            if re.search(r"reference (bootcamp|course)", p, re.IGNORECASE) and BOOTCAMP_URL not in p]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_claims_five_notebooks(path: Path) -> None:
    text = "\n".join(paragraphs(path))
    assert not re.search(r"\bfive notebooks\b", text, re.IGNORECASE), f"{path.name} says 'five notebooks'"


@pytest.mark.parametrize("path", [*NOTEBOOKS, *DOCS], ids=lambda p: p.name)
def test_the_reference_bootcamp_is_named_and_linked_where_cited(path: Path) -> None:
    assert not uncited_bootcamp(path), f"{path.name} cites the reference bootcamp without its link: " \
                                       f"{uncited_bootcamp(path)}"


def test_the_citation_check_can_fail(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("As the reference bootcamp shows, throughput is hard.\n\nOther text.\n")
    assert uncited_bootcamp(doc)
    doc.write_text(f"The reference bootcamp ({BOOTCAMP_URL}) shows it.\n")
    assert not uncited_bootcamp(doc)


def test_the_measured_sign_is_explained_up_front() -> None:
    overview = "\n".join(paragraphs(ROOT / "notebooks" / "00_setup.ipynb"))
    assert re.search(r"≈ means \"measured\", not \"approximately\"", overview), \
        "notebook 00 must say once that ≈ marks a measured value, not an approximation"
