"""The package's layers are real: imports only go one way, and the scripts use the training layer only.

Layers, lowest first: ``training`` → ``runner`` → ``lessons`` → ``environment``. A module may import
from its own layer and the layers before it; ``source_code/`` may import ``course_lib.training`` only
(so a learner can carry a script and that one folder to a cluster). Imports are read with ``ast`` in
every form Python has — ``import a.b.c``, ``from a.b import c`` (``c`` a module or a name),
relative imports (``from . import c``, ``from ..runner import launch``), imports inside functions, and
``importlib.import_module("...")`` / ``__import__("...")`` with a literal name — and each is resolved to
the module it loads, so neither a lazy import nor a ``from package import module`` can hide a
wrong-way dependency or a cycle. The checker is tested on planted cycles and upward imports of each form.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_lib"
ORDER = ["training", "runner", "lessons", "environment"]


def _module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _is_module(name: str, root: Path) -> bool:
    """Whether ``name`` (``course_lib.x.y``) is a module or package under ``root``."""
    rel = Path(*name.split("."))
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def _literal_import(node: ast.Call) -> str | None:
    """``importlib.import_module("x")``, ``import_module("x")`` or ``__import__("x")`` -> ``"x"``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def imports_of(path: Path, root: Path = ROOT) -> list[str]:
    """The ``course_lib`` modules ``path`` imports, each resolved to a module (or package) name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _module_name(path, root).split(".")
    package = own if path.name == "__init__.py" else own[:-1]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                found.append(candidate if _is_module(candidate, root) else module)
        elif isinstance(node, ast.Call):
            literal = _literal_import(node)
            if literal:
                found.append(literal)
    return [n for n in found if n == "course_lib" or n.startswith("course_lib.")]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


def wrong_way_imports(root: Path = ROOT) -> list[str]:
    """Every import from a lower layer into a higher one (or into no layer), as messages."""
    problems = []
    for path in sorted((root / "course_lib").rglob("*.py")):
        name = _module_name(path, root)
        own = _layer(name)
        if own is None:  # course_lib/__init__.py and __main__.py (the command line) sit on top
            continue
        for target in imports_of(path, root):
            layer = _layer(target)
            if layer is None:
                problems.append(f"{name} imports {target}: name a layer module")
            elif ORDER.index(layer) > ORDER.index(own):
                problems.append(f"{name} ({own}) imports {target} ({layer}): a lower layer must not "
                                f"depend on a higher one (order: {' -> '.join(ORDER)})")
    return problems


def find_cycle(root: Path = ROOT) -> list[str] | None:
    """One import cycle between the modules under ``root/course_lib`` (``None`` when there is none)."""
    modules = {_module_name(p, root): p for p in (root / "course_lib").rglob("*.py")}
    edges = {name: sorted({t for t in imports_of(path, root) if t in modules and t != name})
             for name, path in modules.items()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in edges[node]:
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, stack + [nxt])
                if cycle:
                    return cycle
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


LIBRARY = sorted(p for p in PACKAGE.rglob("*.py"))
SCRIPTS = sorted((ROOT / "source_code").glob("*.py"))


def test_every_module_sits_in_a_layer() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py"], f"modules outside the layer folders: {top}"
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ORDER)


def test_imports_go_one_way() -> None:
    assert wrong_way_imports() == []


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_scripts_import_only_the_training_layer(path: Path) -> None:
    for target in imports_of(path):
        assert _layer(target) == "training", (
            f"source_code/{path.name} imports {target}: scripts may use course_lib.training only")


def test_no_import_cycles_between_modules() -> None:
    cycle = find_cycle()
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_every_form_resolves_to_the_module_it_loads(tmp_path: Path) -> None:
    pkg = tmp_path / "course_lib" / "training"
    pkg.mkdir(parents=True)
    for init in (tmp_path / "course_lib" / "__init__.py", pkg / "__init__.py"):
        init.write_text("")
    (pkg / "epochs.py").write_text("X = 1\n")
    (pkg / "user.py").write_text(
        "import course_lib.training.epochs\n"
        "from course_lib.training import epochs\n"
        "from course_lib.training.epochs import X\n"
        "from . import epochs as again\n"
        "from .epochs import X as Y\n"
        "def late():\n    import importlib\n    importlib.import_module('course_lib.training.epochs')\n")
    assert imports_of(pkg / "user.py", tmp_path) == ["course_lib.training.epochs"] * 6


PLANTED = {  # the form of the import back from epochs to pipeline
    "from-package-import-module": "from course_lib.training import pipeline\n",
    "import-dotted": "import course_lib.training.pipeline\n",
    "from-module-import-name": "from course_lib.training.pipeline import make\n",
    "relative-module": "from . import pipeline\n",
    "relative-name": "from .pipeline import make\n",
    "lazy-in-function": "def f():\n    from course_lib.training import pipeline\n    return pipeline\n",
    "import-module-call": "import importlib\n\ndef f():\n    return importlib.import_module('course_lib.training.pipeline')\n",
}


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize("form", sorted(PLANTED))
def test_a_planted_cycle_of_every_form_is_found(tmp_path: Path, form: str) -> None:
    root = _copy(tmp_path)
    epochs = root / "course_lib" / "training" / "epochs.py"
    pipeline = root / "course_lib" / "training" / "pipeline.py"
    assert find_cycle(root) is None  # the copy starts clean
    pipeline.write_text(pipeline.read_text() + "\nfrom course_lib.training import epochs as _e  # planted\n")
    epochs.write_text(epochs.read_text() + "\n" + PLANTED[form])
    cycle = find_cycle(root)
    assert cycle is not None and {"course_lib.training.pipeline", "course_lib.training.epochs"} <= set(cycle), (
        form, cycle)


UPWARD = {
    "from-package-import-module": "from course_lib.runner import launch\n",
    "import-dotted": "import course_lib.runner.launch\n",
    "from-module-import-name": "from course_lib.runner.launch import run_horovod\n",
    "relative": "from ..runner import launch\n",
    "lazy-in-function": "def f():\n    from course_lib.lessons import scaling\n    return scaling\n",
    "import-module-call": "import importlib\nimportlib.import_module('course_lib.environment.doctor')\n",
}


@pytest.mark.parametrize("form", sorted(UPWARD))
def test_an_upward_import_of_every_form_is_found(tmp_path: Path, form: str) -> None:
    root = _copy(tmp_path)
    bad = root / "course_lib" / "training" / "bad.py"
    bad.write_text(UPWARD[form])
    problems = wrong_way_imports(root)
    assert len(problems) == 1 and problems[0].startswith("course_lib.training.bad (training) imports"), problems


def test_the_real_tree_has_from_package_import_module_edges() -> None:
    """The form the old checker dropped is in use, so the resolution matters here."""
    edges = [t for p in LIBRARY for t in imports_of(p) if t.count(".") == 2]
    assert edges and any("from course_lib.training import" in p.read_text() for p in LIBRARY)
