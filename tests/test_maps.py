"""The generated maps are what the code and the notebooks say (issue 54, items 3 and 5).

``tools/maintainers/maps.py`` writes the module map and the import counts into ``docs/architecture.md``, the
notebook table into ``README.md``, the order of the day into ``docs/instructors.md`` and the sentence listing the
notebooks into notebook 00's overview cell. These tests fail when a committed block differs from what the tool
generates (someone typed into a block, added a module or a notebook, changed a docstring's first sentence or an
import without regenerating), as ``tests/test_run_times.py`` does for the run-time blocks; the scratch tests
plant each kind of change and watch the check see it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_layers import ORDER
from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
maps = load_tool("maps")

ALL_BLOCKS = ["docs/architecture.md: module-map", "docs/architecture.md: import-counts", "README.md: notebook-list",
              "docs/instructors.md: notebook-list", "notebooks/00_setup.ipynb: notebook-overview"]


def test_the_generated_maps_are_committed() -> None:
    stale = maps.stale(ROOT)
    assert not stale, f"generated blocks that differ from the code and the notebooks: {stale}; " \
                      "run .venv/bin/python tools/maintainers/maps.py --write (never type into a block)"


def test_the_tool_knows_the_layers_the_tests_enforce() -> None:
    assert list(maps.LAYERS) == ORDER


def test_every_notebook_is_listed_once_in_each_list() -> None:
    names = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    assert [nb["name"] for nb in maps.notebooks(ROOT)] == names
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    day = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    for name in names:
        assert readme.count(f"| `{name}` |") == 1 and day.count(f". **{name}** ·") == 1
    assert maps.overview_sentence(ROOT).startswith(f"The course has {maps.NUMBERS[len(names)]} notebooks: this one")


def test_the_counts_are_those_of_the_graph() -> None:
    counts = maps.counts(ROOT)
    assert list(counts) == ORDER and counts["training"]["out"] == 0
    assert counts["runner"]["modules"] == len([p for p in (ROOT / "course_lib" / "runner").rglob("*.py")
                                               if p.stem != "__init__" and "__pycache__" not in p.parts])
    assert maps.floors({"a": {"b"}, "b": {"c"}, "c": set(), "d": set()}) == 3


def _scratch(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "notebooks").mkdir()
    for doc in ("docs/architecture.md", "docs/instructors.md", "README.md"):
        shutil.copy(ROOT / doc, tmp_path / doc)
    for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        shutil.copy(path, tmp_path / "notebooks" / path.name)
    return tmp_path


def test_the_scratch_copy_is_clean(tmp_path: Path) -> None:
    assert maps.stale(_scratch(tmp_path)) == []


@pytest.mark.parametrize("doc, old, new, block", [
    ("docs/architecture.md", "- `machine.capacity`:", "- `machine.capacity_typed_by_hand`:", "module-map"),
    ("docs/architecture.md", "\n\nBetween the layers:", "\n| planted | 0 | 0 | 0 | 0 |\n\nBetween the layers:",
     "import-counts"),
    ("README.md", "| `03_horovod` | the five Horovod changes", "| `03_horovod` | the six Horovod changes",
     "notebook-list"),
    ("docs/instructors.md", ". **07_frameworks** ·", ". **07_frameworks_old** ·", "notebook-list"),
])
def test_a_line_typed_into_a_block_is_stale(tmp_path: Path, doc: str, old: str, new: str, block: str) -> None:
    root = _scratch(tmp_path)
    text = (root / doc).read_text(encoding="utf-8")
    assert old in text
    (root / doc).write_text(text.replace(old, new, 1), encoding="utf-8")
    assert maps.stale(root) == [f"{doc}: {block}"]
    assert maps.write(root) == [f"{doc}: {block}"] and maps.stale(root) == []
    assert (root / doc).read_text(encoding="utf-8") == text


def test_a_new_module_and_a_new_import_are_seen(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    (root / "course_lib" / "runner" / "planted.py").write_text(
        '"""A planted module: it says what it is for. The second sentence is not its role."""\n\n'
        "from course_lib.runner import launch  # noqa: F401\n")
    assert maps.stale(root) == ["docs/architecture.md: module-map", "docs/architecture.md: import-counts"]
    maps.write(root)
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "- `planted`: A planted module: it says what it is for.\n" in text
    before, after = maps.counts(ROOT)["runner"], maps.counts(root)["runner"]
    assert (after["modules"], after["arrows"]) == (before["modules"] + 1, before["arrows"] + 1)


def test_a_new_notebook_joins_every_list(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    nb = json.loads((root / "notebooks" / "07_frameworks.ipynb").read_text(encoding="utf-8"))
    nb["cells"] = [{"cell_type": "markdown", "id": "intro", "metadata": {}, "source": [
        "# 08 · Sharded training\n", "\n", "<!-- summary: what ZeRO shards, measured -->\n",
        "<!-- overview: sharding the optimizer state -->\n"]}]
    (root / "notebooks" / "08_sharding.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    assert maps.stale(root) == ALL_BLOCKS[2:]
    maps.write(root)
    assert "| `08_sharding` | what ZeRO shards, measured |" in (root / "README.md").read_text(encoding="utf-8")
    assert "9. **08_sharding** · Sharded training" in (root / "docs" / "instructors.md").read_text(encoding="utf-8")
    assert maps.overview_sentence(root).startswith("The course has nine notebooks: this one, ")
    assert maps.overview_sentence(root).endswith(" four frameworks (07) and sharding the optimizer state (08).")


def test_a_notebook_without_its_marked_lines_is_refused(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    path = root / "notebooks" / "05_communication.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][0]["source"] = [line for line in nb["cells"][0]["source"] if not line.startswith("<!-- summary:")]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="05_communication.ipynb: the first markdown cell needs"):
        maps.stale(root)


def test_writing_keeps_the_notebook_json_format(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    path = root / "notebooks" / "00_setup.ipynb"
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace("The course has eight notebooks", "The course has seven notebooks"),
                    encoding="utf-8")
    assert maps.stale(root) == ["notebooks/00_setup.ipynb: notebook-overview"]
    maps.write(root)
    assert path.read_text(encoding="utf-8") == original
