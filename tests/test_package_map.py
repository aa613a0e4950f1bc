"""The map of the package matches the package: the docstring of ``course_lib/__init__.py`` and the layers block
and table of ``docs/architecture.md`` list every module under its layer, and state the layer graph that
``tests/test_layers.py`` enforces (``MAY_IMPORT``). A new module that is not written into both fails here,
and so does a changed graph; the last tests plant each mistake in a scratch copy and watch the check fail.
A module of a layer's sub-package (``training/machine/capacity.py``) is named ``machine.capacity`` in both, never bare.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from test_layers import MAY_IMPORT, ORDER

ROOT = Path(__file__).resolve().parents[1]


def layer_modules(root: Path) -> dict[str, set[str]]:
    """The modules of each layer folder (``__init__`` left out); a module of a sub-package is ``sub.module``.

    The rule for a sub-package of a layer (``training/machine/``, say): the map names each of its modules as
    ``machine.capacity``, in the package docstring (````machine.capacity````) and in docs/architecture.md's block.
    """
    found: dict[str, set[str]] = {}
    for layer in ORDER:
        folder = root / "course_lib" / layer
        found[layer] = {".".join(p.relative_to(folder).with_suffix("").parts) for p in folder.rglob("*.py")
                        if p.stem != "__init__" and "__pycache__" not in p.parts}
    return found


def _imports_named(text: str) -> set[str]:
    words = {w.strip() for w in re.split(r",|\band\b", text)}
    return set() if words & {"nothing", "no other layer"} else {w for w in words if w}


def docstring_problems(root: Path) -> list[str]:
    """What the package docstring misses or states wrongly."""
    doc = ast.get_docstring(ast.parse((root / "course_lib" / "__init__.py").read_text(encoding="utf-8"))) or ""
    heads = list(re.finditer(r"^``(\w+)/`` \(imports ([^)]*)\)$", doc, re.M))
    problems = []
    found = {m.group(1) for m in heads}
    if found != set(ORDER):
        problems.append(f"the docstring describes the layers {sorted(found)}, the package has {sorted(ORDER)}")
    for i, head in enumerate(heads):
        layer = head.group(1)
        if layer not in MAY_IMPORT:
            continue
        if _imports_named(head.group(2)) != MAY_IMPORT[layer]:
            problems.append(f"the docstring says {layer}/ imports {head.group(2)!r}; tests/test_layers.MAY_IMPORT "
                            f"says {sorted(MAY_IMPORT[layer]) or 'nothing'}")
        section = doc[head.end(): heads[i + 1].start() if i + 1 < len(heads) else len(doc)]
        named = set(re.findall(r"``(\w+(?:\.\w+)*)``", section))
        missing = sorted(layer_modules(root)[layer] - named)
        if missing:
            problems.append(f"the docstring's {layer}/ section does not name {missing}")
    return problems


def architecture_problems(root: Path) -> list[str]:
    """What the layers block and the layer table of docs/architecture.md miss or state wrongly."""
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text[text.index("course_lib/\n"): text.index("```", text.index("course_lib/\n"))]
    problems = []
    starts = {m.group(1): m.start() for m in re.finditer(r"^   (\w+)/ ", block, re.M)}
    if set(starts) != set(ORDER):
        problems.append(f"the layers block draws {sorted(starts)}, the package has {sorted(ORDER)}")
    ordered = sorted(starts.items(), key=lambda item: item[1])
    for i, (layer, start) in enumerate(ordered):
        lines = block[start: ordered[i + 1][1] if i + 1 < len(ordered) else len(block)]
        missing = sorted(m for m in layer_modules(root).get(layer, set())
                         if not re.search(rf"(?<![\w.]){re.escape(m)}(?![\w.]*\w)", lines))
        if missing:
            problems.append(f"the layers block's {layer}/ lines do not name {missing}")
    table = dict(re.findall(r"^\| (\w+) \| ([^|]+) \|$", text, re.M))
    for layer in ORDER:
        if layer not in table:
            problems.append(f"the layer table has no row for {layer}")
        elif _imports_named(table[layer]) != MAY_IMPORT[layer]:
            problems.append(f"the layer table says {layer} may import {table[layer].strip()!r}; "
                            f"tests/test_layers.MAY_IMPORT says {sorted(MAY_IMPORT[layer]) or 'nothing'}")
    return problems


def test_the_package_docstring_matches_the_code():
    assert docstring_problems(ROOT) == []


def test_docs_architecture_matches_the_code():
    assert architecture_problems(ROOT) == []


def _scratch(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", tmp_path / "docs" / "architecture.md")
    return tmp_path


@pytest.mark.parametrize("planted", ["training/planted.py", "training/machine/planted.py"])
def test_a_module_missing_from_the_map_fails(tmp_path, planted):
    """A new module of a layer, or of a layer's sub-package (named ``machine.planted`` in the map)."""
    root = _scratch(tmp_path)
    (root / "course_lib" / planted).write_text('"""A new module nobody wrote into the map."""\n')
    name = planted.removeprefix("training/").removesuffix(".py").replace("/", ".")
    assert any(repr(name) in p for p in docstring_problems(root))
    assert any(repr(name) in p for p in architecture_problems(root))


def test_a_sub_package_module_named_bare_fails(tmp_path):
    """``slot_files`` alone does not name ``training/machine/slot_files.py``: the map must say ``machine.slot_files``."""
    root = _scratch(tmp_path)
    for path in (root / "course_lib" / "__init__.py", root / "docs" / "architecture.md"):
        text = path.read_text(encoding="utf-8")
        assert "machine.slot_files" in text
        path.write_text(text.replace("machine.slot_files", "slot_files"), encoding="utf-8")
    assert any("'machine.slot_files'" in p for p in docstring_problems(root))
    assert any("'machine.slot_files'" in p for p in architecture_problems(root))


@pytest.mark.parametrize("where", ["docstring", "table"])
def test_a_wrong_layer_graph_fails(tmp_path, where):
    root = _scratch(tmp_path)
    if where == "docstring":
        path = root / "course_lib" / "__init__.py"
        old, new = "``lessons/`` (imports training, runner)", "``lessons/`` (imports training)"
        check = docstring_problems
    else:
        path = root / "docs" / "architecture.md"
        old, new, check = "| lessons | training, runner |", "| lessons | training, runner, environment |", \
            architecture_problems
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    assert any("lessons" in p for p in check(root))
