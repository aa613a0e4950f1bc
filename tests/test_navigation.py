"""Every notebook opens with generated previous/next links and a table of contents (tools/navigation.py)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("navigation", ROOT / "tools" / "navigation.py")
navigation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(navigation)


def test_every_notebook_has_an_up_to_date_navigation_cell() -> None:
    stale = navigation.update(ROOT / "notebooks", check=True)
    assert not stale, f"stale navigation cells in {[p.name for p in stale]}: run .venv/bin/python tools/navigation.py"


def test_links_point_at_the_neighbours_and_every_section(tmp_path: Path) -> None:
    for name in ("00_setup.ipynb", "01_data_parallelism.ipynb", "02_mirrored_strategy.ipynb"):
        shutil.copy(ROOT / "notebooks" / name, tmp_path / name)
    navigation.update(tmp_path, check=False)
    middle = nbformat.read(tmp_path / "01_data_parallelism.ipynb", as_version=4)
    cell = middle.cells[1]
    assert cell.metadata["tags"] == ["navigation"]
    assert "(00_setup.ipynb)" in cell.source and "(02_mirrored_strategy.ipynb)" in cell.source
    assert "[Setup](#Setup)" in cell.source and "[Exercises](#Exercises)" in cell.source
    first = nbformat.read(tmp_path / "00_setup.ipynb", as_version=4).cells[1].source
    assert "←" not in first and "(01_data_parallelism.ipynb)" in first


def test_check_finds_a_stale_cell_and_a_rerun_is_stable(tmp_path: Path) -> None:
    shutil.copy(ROOT / "notebooks" / "01_data_parallelism.ipynb", tmp_path / "01_a.ipynb")
    shutil.copy(ROOT / "notebooks" / "02_mirrored_strategy.ipynb", tmp_path / "02_b.ipynb")
    assert navigation.update(tmp_path, check=True)                     # the neighbours changed: stale
    navigation.update(tmp_path, check=False)
    assert navigation.update(tmp_path, check=True) == []
    nb = nbformat.read(tmp_path / "02_b.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("## A new section"))
    nbformat.write(nb, tmp_path / "02_b.ipynb")
    assert [p.name for p in navigation.update(tmp_path, check=True)] == ["02_b.ipynb"]
    assert sum("navigation" in c.get("metadata", {}).get("tags", []) for c in nb.cells) == 1
