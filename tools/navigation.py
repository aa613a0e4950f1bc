"""Previous/next links and a table of contents at the top of every notebook (``make notebooks`` runs it).

Each notebook ``notebooks/NN_name.ipynb`` gets one markdown cell right after its title cell, tagged
``navigation``: a link to the previous and the next notebook (by number) and a link to each of its own
``## `` sections, in order. The cell is generated, never edited by hand: run this tool after adding,
renaming or re-titling a notebook or a section; ``tests/test_navigation.py`` fails when a cell is out
of date. The site (``tools/site.py``) turns the ``.ipynb`` links into links to its pages.

Usage::

    .venv/bin/python tools/navigation.py           # rewrite the navigation cells
    .venv/bin/python tools/navigation.py --check   # exit 1 and name the notebooks whose cell is stale

Introduced for issue 30 (previous/next links and a table of contents in every notebook).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TAG = "navigation"
SECTION = re.compile(r"^## (.+?)\s*$", re.MULTILINE)


def title(nb: nbformat.NotebookNode, path: Path) -> str:
    """The notebook's ``# `` title (its first markdown cell's first line), else its file name."""
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    line = first.splitlines()[0] if first else ""
    return line[2:].strip() if line.startswith("# ") else path.stem


def anchor(heading: str) -> str:
    """JupyterLab's (and nbconvert's) anchor of a heading: its text, code marks dropped, blanks as '-'."""
    text = re.sub(r"[`*]", "", heading).strip()
    return "#" + re.sub(r"\s+", "-", text)


def navigation_text(paths: list[Path], index: int, notebooks: list[nbformat.NotebookNode]) -> str:
    """The markdown of notebook ``index``'s navigation cell."""
    links = []
    if index > 0:
        links.append(f"[← {title(notebooks[index - 1], paths[index - 1])}]({paths[index - 1].name})")
    if index + 1 < len(paths):
        links.append(f"[{title(notebooks[index + 1], paths[index + 1])} →]({paths[index + 1].name})")
    sections = [m.group(1) for c in notebooks[index].cells if c.cell_type == "markdown"
                and TAG not in c.get("metadata", {}).get("tags", []) for m in SECTION.finditer(c.source)]
    contents = " · ".join(f"[{re.sub(r'[`*]', '', s)}]({anchor(s)})" for s in sections)
    return f"**Course:** {' · '.join(links)}\n\n**In this notebook:** {contents}"


def update(folder: Path, *, check: bool) -> list[Path]:
    """Rewrite (or, with ``check``, only compare) every notebook's navigation cell; return the stale ones."""
    paths = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    notebooks = [nbformat.read(p, as_version=4) for p in paths]
    stale = []
    for i, (path, nb) in enumerate(zip(paths, notebooks)):
        text = navigation_text(paths, i, notebooks)
        current = [j for j, c in enumerate(nb.cells) if TAG in c.get("metadata", {}).get("tags", [])]
        if len(current) == 1 and current[0] == 1 and nb.cells[1].source == text:
            continue
        stale.append(path)
        if check:
            continue
        for j in reversed(current):
            del nb.cells[j]
        cell = nbformat.v4.new_markdown_cell(text)
        cell.metadata["tags"] = [TAG]
        nb.cells.insert(1, cell)
        nbformat.write(nb, path)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale navigation cells (exit 1)")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help="the notebooks' folder")
    args = parser.parse_args(argv)
    stale = update(args.notebooks, check=args.check)
    for path in stale:
        print(f"{'stale' if args.check else 'updated'}: {path.name}")
    if args.check and stale:
        print("run: .venv/bin/python tools/navigation.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
