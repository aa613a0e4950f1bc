"""The hand-written parts of the package's map: the layer table of ``docs/architecture.md`` states the layer graph
that ``tests/test_layers.py`` enforces (``MAY_IMPORT``); the package docstring points to ``docs/architecture.md``
instead of listing modules; and every row of the owners table names a module that exists (with the name it
names in it, where it names one). The module map itself is generated (``tools/maintainers/maps.py``) and checked
"generated == committed" by ``tests/test_maps.py``.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from test_layers import MAY_IMPORT, ORDER

ROOT = Path(__file__).resolve().parents[1]


def _imports_named(text: str) -> set[str]:
    words = {w.strip() for w in re.split(r",|\band\b", text)}
    return set() if words & {"nothing", "no other layer"} else {w for w in words if w}


def layer_table_problems(root: Path) -> list[str]:
    """What the layer table of docs/architecture.md states wrongly against ``MAY_IMPORT``."""
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| (\w+) \| ([^|]+) \|$", text, re.M))
    problems = []
    for layer in ORDER:
        if layer not in table:
            problems.append(f"the layer table has no row for {layer}")
        elif _imports_named(table[layer]) != MAY_IMPORT[layer]:
            problems.append(f"the layer table says {layer} may import {table[layer].strip()!r}; "
                            f"tests/test_layers.MAY_IMPORT says {sorted(MAY_IMPORT[layer]) or 'nothing'}")
    return problems


def docstring_problems(root: Path) -> list[str]:
    """The package docstring points to docs/architecture.md and lists no module (the generated map does)."""
    doc = ast.get_docstring(ast.parse((root / "course_lib" / "__init__.py").read_text(encoding="utf-8"))) or ""
    problems = [] if "docs/architecture.md" in doc else ["the package docstring does not point to docs/architecture.md"]
    modules = {p.stem for p in (root / "course_lib").rglob("*.py") if p.stem not in {"__init__", "__main__"}}
    listed = sorted(set(re.findall(r"``(\w+)``", doc)) & modules)
    if listed:
        problems.append(f"the package docstring lists modules {listed}: docs/architecture.md's generated map does")
    return problems


def owner_rows(text: str) -> list[tuple[str, str]]:
    """(concept, owner) of each row of the owners table."""
    start = text.index("| concept | its one owner |")
    end = text.find("\n\n", start)
    return re.findall(r"^\| (.+?) \| (.+) \|$", text[start: end if end > 0 else len(text)], re.M)[1:]


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def reference_problem(root: Path, reference: str) -> str | None:
    """None when ``layer.module[.name]`` names a module (a file or a package) of course_lib, and the name in it."""
    parts = reference.split(".")
    if "<topic>" in parts:   # lessons.<topic>.checks: some topic has it
        i = parts.index("<topic>")
        topics = [p.name for p in (root / "course_lib").joinpath(*parts[:i]).iterdir() if p.is_dir()]
        return None if any(reference_problem(root, ".".join([*parts[:i], t, *parts[i + 1:]])) is None
                           for t in topics) else f"no topic has {reference}"
    folder = root / "course_lib"
    for i, part in enumerate(parts):
        if (folder / part / "__init__.py").exists():
            folder = folder / part
            continue
        if (folder / f"{part}.py").exists():
            rest = parts[i + 1:]
            if rest and rest[0] not in _top_level_names(folder / f"{part}.py"):
                return f"{'.'.join(parts[:i + 1])} defines no {rest[0]!r}"
            return None
        return f"{reference} names no module of course_lib"
    return None if len(parts) >= 2 else f"{reference} names no module of course_lib"


def owner_problems(root: Path) -> list[str]:
    """Rows whose owner names no existing module (first reference of each row; every layer-prefixed one)."""
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    problems = []
    for concept, owner in owner_rows(text):
        references = re.findall(r"`([^`]+)`", owner)
        if not references or references[0].split(".")[0] not in ORDER:
            problems.append(f"the owners row {concept!r} does not start with a module (layer.module)")
        for reference in references:
            if reference.split(".")[0] in ORDER and (problem := reference_problem(root, reference)):
                problems.append(f"the owners row {concept!r}: {problem}")
    return problems


def test_the_layer_table_matches_may_import():
    assert layer_table_problems(ROOT) == []


def test_the_package_docstring_points_to_the_map():
    assert docstring_problems(ROOT) == []


def test_every_owner_names_a_module_that_exists():
    assert len(owner_rows((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))) > 10
    assert owner_problems(ROOT) == []


def _scratch(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", tmp_path / "docs" / "architecture.md")
    return tmp_path


def test_a_wrong_layer_graph_fails(tmp_path):
    root = _scratch(tmp_path)
    path = root / "docs" / "architecture.md"
    old, new = "| lessons | training, runner |", "| lessons | training, runner, environment |"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    assert any("lessons" in p for p in layer_table_problems(root))


def test_a_module_list_in_the_docstring_fails(tmp_path):
    root = _scratch(tmp_path)
    path = root / "course_lib" / "__init__.py"
    path.write_text(path.read_text(encoding="utf-8").replace("Importing the package", "``launch``, ``slots``.\n\n"
                                                             "Importing the package"), encoding="utf-8")
    assert docstring_problems(root) == ["the package docstring lists modules ['launch', 'slots']: "
                                        "docs/architecture.md's generated map does"]


@pytest.mark.parametrize("old, new, expected", [
    ("`runner.preflight.find_horovodrun`", "`runner.preflight_gone.find_horovodrun`",
     "runner.preflight_gone.find_horovodrun names no module"),
    ("`runner.preflight.find_horovodrun`", "`runner.preflight.find_horovodrun_gone`", "defines no 'find_horovodrun_gone'"),
    ("`lessons.<topic>.checks`", "`lessons.<topic>.checks_gone`", "no topic has lessons.<topic>.checks_gone"),
    ("`training.machine.capacity.plan_workers`", "`training.machine.capacity_gone.plan_workers`",
     "training.machine.capacity_gone.plan_workers names no module"),
])
def test_an_owner_that_moved_fails(tmp_path, old, new, expected):
    root = _scratch(tmp_path)
    path = root / "docs" / "architecture.md"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    assert any(expected in p for p in owner_problems(root)), owner_problems(root)
