"""The package's layers are real: imports only go one way, and the scripts use the training layer only.

Layers, lowest first: ``training`` → ``runner`` → ``lessons`` → ``environment``. A module may import
from its own layer and the layers before it; ``source_code/`` may import ``course_lib.training`` only
(so a learner can carry a script and that one folder to a cluster). Imports are read with ``ast``,
including those inside functions, so a lazy import cannot hide a wrong-way dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_lib"
ORDER = ["training", "runner", "lessons", "environment"]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "course_lib":
                found += [f"course_lib.{alias.name}" for alias in node.names]
            else:
                found.append(node.module)
    return [name for name in found if name == "course_lib" or name.startswith("course_lib.")]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


LIBRARY = sorted(p for p in PACKAGE.rglob("*.py"))


def test_every_module_sits_in_a_layer() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py"], f"modules outside the layer folders: {top}"
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ORDER)


@pytest.mark.parametrize("path", LIBRARY, ids=[_module_name(p) for p in LIBRARY])
def test_imports_go_one_way(path: Path) -> None:
    own = _layer(_module_name(path))
    if own is None:  # course_lib/__init__.py and __main__.py (the command line) sit on top
        return
    for target in _imports(path):
        layer = _layer(target)
        assert layer is not None, f"{_module_name(path)} imports {target}: name a layer module"
        assert ORDER.index(layer) <= ORDER.index(own), (
            f"{_module_name(path)} ({own}) imports {target} ({layer}): a lower layer must not depend "
            f"on a higher one (order: {' -> '.join(ORDER)})")


SCRIPTS = sorted((ROOT / "source_code").glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_scripts_import_only_the_training_layer(path: Path) -> None:
    for target in _imports(path):
        assert _layer(target) == "training", (
            f"source_code/{path.name} imports {target}: scripts may use course_lib.training only")


def test_no_import_cycles_between_modules() -> None:
    graph = {}
    for path in LIBRARY:
        name = _module_name(path)
        graph[name] = {t for t in _imports(path) if t != name}
    # Keep only edges to modules (not packages) that exist.
    names = set(graph)
    edges = {n: {t for t in ts if t in names and not (PACKAGE / "/".join(t.split(".")[1:])).is_dir()}
             for n, ts in graph.items()}
    seen: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(edges[node]):
            if seen.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if nxt not in seen:
                visit(nxt, stack + [nxt])
        seen[node] = 2

    for node in sorted(edges):
        if node not in seen:
            visit(node, [node])


def test_the_check_bites(tmp_path: Path) -> None:
    """A training module that imports the runner is reported (the rule is not vacuous)."""
    bad = tmp_path / "course_lib" / "training" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("def f():\n    from course_lib.runner import launch\n")
    assert _imports(bad) == ["course_lib.runner"]
    assert ORDER.index(_layer("course_lib.runner.launch")) > ORDER.index("training")
