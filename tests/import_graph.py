"""Every import a Python file makes of a package's own modules, whatever its form (for tests/test_layers.py).

Read with ``ast``, never by importing: ``import a.b.c`` and ``import a.b.c as x``; ``from a.b import c``
where ``c`` is a module (an edge to ``a.b.c``) or a name defined in ``a.b`` (an edge to ``a.b``, its
``__init__.py`` when ``a.b`` is a package); relative imports (``from . import c``, ``from ..b.c import d``);
``from a.b import *``; ``importlib.import_module("a.b.c")`` (also with ``package=`` for a relative name,
and called as ``import_module`` or ``__import__``). Imports inside functions and under ``TYPE_CHECKING``
count as well: a lazy import is a dependency all the same. A dynamic import whose name is not a string
literal cannot be read, so it is reported as a problem rather than silently dropped.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

_DYNAMIC = {"import_module", "__import__"}


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` (a module) imports ``target`` (a module or package of the tree), at ``line``."""

    source: str
    target: str
    line: int


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module and package under ``root/package``, by dotted name (a package names its ``__init__.py``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve_from(base: str, names: list[str], known: dict[str, Path]) -> list[str]:
    """``from base import n1, n2``: each ``base.n`` that is a module, else ``base`` itself."""
    targets = []
    for name in names:
        sub = f"{base}.{name}"
        targets.append(sub if name != "*" and sub in known else base)
    return targets


def _dynamic_name(call: ast.Call) -> tuple[str | None, str | None] | None:
    """``(name, package)`` of ``importlib.import_module(...)`` / ``__import__(...)``; None for another call."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in _DYNAMIC or not call.args:
        return None
    first = call.args[0]
    name = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    package = None
    for keyword in call.keywords:
        if keyword.arg == "package" and isinstance(keyword.value, ast.Constant):
            package = keyword.value.value
    if called == "import_module" and len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
        package = call.args[1].value
    return name, package


def imports(path: Path, source: str, known: dict[str, Path], package: str) -> tuple[list[Edge], list[str]]:
    """The edges from the file ``path`` (module name ``source``) into ``package``, and what could not be read.

    Args:
        path: the Python file.
        source: its dotted module name (for a script outside the package, any name: it has no relative imports).
        known: :func:`modules` of the tree.
        package: the top-level package whose edges are kept (``course_lib``).

    Returns:
        The edges to modules of ``package``, in file order, and problems: a name of ``package`` that is no
        module of the tree, a relative import past the top, a dynamic import of a non-literal name.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    here = source if _is_package(path) else source.rpartition(".")[0]
    edges: list[Edge] = []
    problems: list[str] = []

    def keep(target: str, line: int) -> None:
        if target != package and not target.startswith(package + "."):
            return
        # The longest prefix that is a module: ``import course_lib.training.epochs`` is that module.
        probe = target
        while probe not in known and "." in probe:
            probe = probe.rpartition(".")[0]
        if probe != target:
            problems.append(f"{source}:{line} imports {target}, which is no module of {package}/")
        if probe in known and probe != source:
            edges.append(Edge(source, probe, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                keep(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = here.split(".") if here else []
                if node.level - 1 > len(up) - 1 or not up:
                    problems.append(f"{source}:{node.lineno} has a relative import past the top package")
                    continue
                base = ".".join(up[: len(up) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for target in _resolve_from(base, [alias.name for alias in node.names], known):
                keep(target, node.lineno)
        elif isinstance(node, ast.Call):
            dynamic = _dynamic_name(node)
            if dynamic is None:
                continue
            name, anchor = dynamic
            if name is None:
                problems.append(f"{source}:{node.lineno} imports a module whose name is not a string literal: "
                                f"write the name out so that the layer check can read it")
                continue
            if name.startswith("."):
                if not anchor:
                    problems.append(f"{source}:{node.lineno} imports {name!r} with no package= to resolve it")
                    continue
                name = importlib.util.resolve_name(name, anchor)
            keep(name, node.lineno)
    return edges, problems


def graph(root: Path, package: str) -> tuple[dict[str, list[Edge]], list[str]]:
    """The import graph of ``root/package`` (module -> its edges) and every problem met while reading it."""
    known = modules(root, package)
    result: dict[str, list[Edge]] = {}
    problems: list[str] = []
    for name, path in known.items():
        result[name], found = imports(path, name, known, package)
        problems += found
    return result, problems


def find_cycle(edges: dict[str, list[Edge]]) -> list[Edge] | None:
    """One import cycle (the edges that close it, in order), or None when the graph has none."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[Edge] = []

    def visit(node: str) -> list[Edge] | None:
        state[node] = 1
        for edge in sorted(edges.get(node, []), key=lambda e: (e.target, e.line)):
            if state.get(edge.target) == 1:
                start = next((i for i, e in enumerate(path) if e.source == edge.target), len(path))
                return path[start:] + [edge]
            if edge.target not in state:
                path.append(edge)
                cycle = visit(edge.target)
                if cycle:
                    return cycle
                path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def describe(cycle: list[Edge]) -> str:
    """``a -> b (a:12) -> a (b:3)``: the cycle with where each edge is written."""
    return " -> ".join([cycle[0].source] + [f"{e.target} ({e.source}:{e.line})" for e in cycle])
