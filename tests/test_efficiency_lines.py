"""Every distribution efficiency the course prints stays within its bound, and the word "ceiling" is gone (issue 52).

A distributed run cannot beat its bound (N one-worker copies that never communicate: course_lib.runner.multiworker.run_bound), so an
efficiency whose whole 95 % interval lies above 1 in a committed notebook or a results file is a failed bound or a
wrong yardstick, and this test fails on it. The one-process run that used to be called a "ceiling" is a yardstick that
runs can beat; the word stays out of the course's pages and code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_lib.lessons.common.efficiency import efficiency_line, parse_efficiency_lines
from course_lib.lessons.common.paired_runs import Paired

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
#: Results files written on or after the day the bound replaced the ceiling (older files keep their history).
RESULTS = [p for p in sorted((REPO / "benchmarks" / "results").glob("*.md"))
           if re.match(r"\d{4}-\d{2}-\d{2}", p.name) and p.name[:10] >= "2026-12-02"]
#: Where `grep -ri ceiling` must find nothing (issue 52's "Done when").
NO_CEILING = ["notebooks", "source_code", "course_lib", "README.md", "benchmarks/README.md"]


def outputs_text(path: Path) -> str:
    """Every output a notebook committed, as text (streams and text/plain)."""
    parts = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            parts.append("".join(text) if isinstance(text, list) else str(text))
    return "\n".join(parts)


def above_bound(text: str) -> list[tuple[float, float]]:
    """The efficiencies in ``text`` whose whole interval lies above 1."""
    return [(mean, ci) for mean, ci in parse_efficiency_lines(text) if mean - ci > 1.0]


def test_the_check_finds_a_run_above_its_bound() -> None:
    """Planted: a line whose interval lies above 1 is found; one that holds 1 is not."""
    planted = efficiency_line("X", Paired(1.20, 0.05, 4, "rounds"))
    fine = efficiency_line("Y", Paired(1.02, 0.05, 4, "rounds"))
    assert above_bound(f"{planted}\n{fine}") == [(1.20, 0.05)]


@pytest.mark.parametrize("path", NOTEBOOKS + RESULTS, ids=lambda p: p.name)
def test_no_printed_efficiency_lies_above_its_bound(path: Path) -> None:
    text = outputs_text(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    assert not above_bound(text), f"{path.name}: an efficiency wholly above its bound: {above_bound(text)}"


def test_the_word_ceiling_is_gone() -> None:
    found = []
    for name in NO_CEILING:
        root = REPO / name
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        for path in files:
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            found += [f"{path.relative_to(REPO)}:{i}" for i, line in enumerate(text.splitlines(), 1)
                      if "ceiling" in line.lower()]
    assert not found, "the one-process run is a yardstick, not a ceiling; still named so at: " + ", ".join(found[:20])
