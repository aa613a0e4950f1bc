"""Imports inside functions only where a module must load late, and each one says why.

An import inside a function hides a dependency from the reader of the module's head. course_lib allows it in
two cases: a heavy or optional third-party package (:data:`HEAVY`: importing ``course_lib`` must not start
TensorFlow, so that ``devices.simulate_devices`` can still run first, and a notebook that plots nothing never
loads matplotlib), named by the import itself; and a course_lib module that must load late (one that imports
TensorFlow at its top, a command that must start where numpy is broken), with a comment on the import's line or
the line above that starts ``# late:`` and says why. Every other import goes to the module's head.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Third-party packages that load late wherever they are used (their names say why).
HEAVY = {"tensorflow", "tensorflow_datasets", "horovod", "pandas", "matplotlib", "ipywidgets", "IPython", "psutil"}


def late_import_problems(root: Path) -> list[str]:
    """Every import inside a function of ``root/course_lib`` that neither names a heavy package nor says why."""
    problems = []
    for path in sorted((root / "course_lib").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                if isinstance(node, ast.ImportFrom):
                    names = ["course_lib" if node.level else (node.module or "")]
                else:
                    names = [alias.name for alias in node.names]
                if all(name.split(".")[0] in HEAVY for name in names):
                    continue
                said = "# late:" in lines[node.lineno - 1] or lines[node.lineno - 2].strip().startswith("# late:")
                if not said:
                    problems.append(f"{path.relative_to(root)}:{node.lineno} imports {', '.join(names)} inside "
                                    f"{func.name}(): move it to the module's head, or say why with '# late: ...'")
    return problems


def test_every_late_import_says_why():
    assert late_import_problems(ROOT) == []


def test_a_silent_late_import_fails(tmp_path):
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "course_lib" / "lessons" / "common" / "scaling.py"
    planted = "\n\ndef planted():\n    from course_lib.training import files\n"
    path.write_text(path.read_text(encoding="utf-8") + planted, encoding="utf-8")
    problems = late_import_problems(tmp_path)
    assert len(problems) == 1 and "scaling.py" in problems[0] and "planted()" in problems[0], problems
