"""Which course_lib modules import TensorFlow when they are imported: derived from the code, held to the doc.

docs/architecture.md names them in one sentence; the rest import TensorFlow inside the functions that need it, so
that a script rejects a bad flag before TensorFlow starts. The list is derived here from each module's syntax tree
(issue 47, item 6): a module-level ``import`` (``try``/``if`` bodies included, ``if TYPE_CHECKING:`` left out) of
TensorFlow, tf_keras, Keras or Horovod's TensorFlow/Keras bindings, or of a course_lib module that does so.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The packages whose import starts TensorFlow.
HEAVY = ("tensorflow", "tf_keras", "keras", "horovod.tensorflow", "horovod.keras")
#: The sentence of docs/architecture.md that names the modules, up to the word that ends the list.
SENTENCE = re.compile(r"`import course_lib` never imports TensorFlow\.(?P<names>.*?)\s+import TensorFlow at the top",
                      re.S)


def _module_name(path: Path, root: Path) -> str:
    """``course_lib/training/keras2.py`` -> ``course_lib.training.keras2`` (a package by its folder's name)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Every dotted name imported at module level (``from a import b`` gives ``a`` and ``a.b``)."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                visit(node.orelse)
                visit(node.finalbody)
                for handler in node.handlers:
                    visit(handler.body)

    visit(tree.body)
    return names


def tf_at_import(root: Path) -> set[str]:
    """The course_lib modules (``training.keras2``, without ``course_lib.``) whose import imports TensorFlow."""
    imports: dict[str, set[str]] = {}
    for path in sorted((root / "course_lib").rglob("*.py")):
        module = _module_name(path, root)
        imports[module] = _top_level_imports(ast.parse(path.read_text()), module, path.name == "__init__.py")

    def heavy(name: str) -> bool:
        return any(name == package or name.startswith(package + ".") for package in HEAVY)

    loaded = {module for module, names in imports.items() if any(heavy(name) for name in names)}
    while True:
        more = {module for module, names in imports.items() if module not in loaded and names & loaded}
        if not more:
            break
        loaded |= more
    return {module.removeprefix("course_lib.") for module in loaded}


def documented(root: Path) -> set[str]:
    """The modules docs/architecture.md says import TensorFlow at the top."""
    match = SENTENCE.search((root / "docs" / "architecture.md").read_text())
    assert match, "docs/architecture.md no longer has the sentence that names the modules importing TensorFlow"
    return set(re.findall(r"`([a-z_][\w.]*)`", match["names"]))


def mismatch(root: Path) -> list[str]:
    derived, written = tf_at_import(root), documented(root)
    return ([f"{name} imports TensorFlow at module level, but docs/architecture.md does not say so"
             for name in sorted(derived - written)]
            + [f"docs/architecture.md says {name} imports TensorFlow at module level, but it does not"
               for name in sorted(written - derived)])


def test_the_doc_names_every_module_that_imports_tensorflow_at_import_and_no_other() -> None:
    assert mismatch(ROOT) == []
    assert "training.keras2" in tf_at_import(ROOT)      # the derivation sees the one that certainly does


def test_a_planted_top_level_import_fails_it(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "docs").mkdir()
    shutil.copy2(ROOT / "docs" / "architecture.md", tmp_path / "docs" / "architecture.md")
    stats = tmp_path / "course_lib" / "training" / "stats.py"
    stats.write_text(stats.read_text().replace("from __future__ import annotations\n",
                                               "from __future__ import annotations\nimport tensorflow as tf\n", 1))
    assert "training.stats imports TensorFlow at module level, but docs/architecture.md does not say so" in \
        mismatch(tmp_path)
    # A module that imports it only for the type checker is not one.
    stats.write_text(stats.read_text().replace("import tensorflow as tf\n",
                                               "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                               "    import tensorflow as tf\n", 1))
    assert mismatch(tmp_path) == mismatch(ROOT)
