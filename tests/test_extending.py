"""The recipe "Adding a notebook" (docs/extending.md) works: a throw-away notebook 99 is picked up everywhere.

A scratch copy of the course (only what the recipe touches) gets ``notebooks/99_throwaway.ipynb`` made from
``tools/notebook_template.ipynb`` the recipe's way: its exercise key in ``course_lib/lessons/common/answers.py``, the
solution and wrong answers in ``instructor/solutions/answers.py``, executed by ``tools/maintainers/run_notebooks.py`` (with
no argument: it must find the notebook by its name). Then strict nbval, the notebook lint tests and the exercise
tests (run in the scratch copy with the course's own pytest settings), the site builder and the learner edition
must all pick it up. The template imports no TensorFlow, so the whole module takes seconds, not minutes.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tools" / "notebook_template.ipynb"
RECIPE = ROOT / "docs" / "extending.md"
NAME = "99_throwaway"
KEY = "99.first"

# What the scratch course holds: what the tools and tests below read, and what the learner edition copies.
COPIED = ["course_lib", "source_code", "cluster", "requirements", "pyproject.toml", "environment.yml", "docs/architecture.md",
          "tools", "instructor/solutions", "conftest.py", "tests/notebooks", "tests/nested_pytest.py",
          "tests/test_notebooks_lint.py", "tests/test_exercises.py"]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")

# Recipe steps 3 and 4, as an author would write them for notebook 99 (anchor -> line inserted after it).
EDITS = {
    "course_lib/lessons/common/answers.py": (
        "EXERCISES: dict[str, Exercise] = {exercise.key: exercise for exercise in [\n",
        f'    Exercise("{KEY}", "Per-worker batch {{per_worker_batch}}, {{workers}} workers: images per step?",\n'
        '             {"per_worker_batch": 256, "workers": 2}, "integer", "per-worker batch x workers",\n'
        "             lambda per_worker_batch, workers: per_worker_batch * workers),\n"),
    "instructor/solutions/answers.py": ("SOLUTIONS = {\n", f'    "{KEY}": 512,\n'),
}
WRONG = ("WRONG = {\n", f'    "{KEY}": [256, 128],\n')


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"extending_{name}", ROOT / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _insert(path: Path, anchor: str, line: str) -> None:
    text = path.read_text()
    assert anchor in text, (f"{path.name} no longer has {anchor.strip()!r}: the recipe in docs/extending.md "
                            "(and this test) must follow the new layout")
    path.write_text(text.replace(anchor, anchor + line, 1))


def _env(course: Path) -> dict[str, str]:
    """The scratch course's course_lib first on the path (of pytest and of every kernel it starts)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(course), os.environ.get("PYTHONPATH", "")]),
            "TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("course")
    for name in COPIED:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, target, ignore=IGNORED)
        else:
            shutil.copy2(ROOT / name, target)
    # Step 1: the notebook, from the template.
    nb = nbformat.read(TEMPLATE, as_version=4)
    for cell in nb.cells:
        cell.source = cell.source.replace("NN", "99")
    (root / "notebooks").mkdir()
    nbformat.write(nb, root / "notebooks" / f"{NAME}.ipynb")
    # Steps 3-4: its exercise and the solution.
    for relative, (anchor, line) in EDITS.items():
        _insert(root / relative, anchor, line)
    _insert(root / "instructor" / "solutions" / "answers.py", *WRONG)
    # Step 7: execute it as `make notebooks` does (every notebooks/NN_*.ipynb, found by name).
    done = subprocess.run([sys.executable, "tools/maintainers/run_notebooks.py"], cwd=root, env=_env(root),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"{NAME}.ipynb:" in done.stdout and "1 notebook(s) executed" in done.stdout, done.stdout
    return root


def test_the_template_has_the_skeleton_and_no_outputs() -> None:
    nb = nbformat.read(TEMPLATE, as_version=4)
    assert nb.cells[0].source.startswith("# NN · "), "the template's title starts with its number, NN"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code), "commit the template unrun"
    assert any('check("NN.' in cell.source for cell in code)
    assert not any("tensorflow" in cell.source for cell in code), "the template stays fast: no TensorFlow"


def test_run_notebooks_executed_it(course: Path) -> None:
    nb = nbformat.read(course / "notebooks" / f"{NAME}.ipynb", as_version=4)
    shown = "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)
    assert "global batch: 512 images per step" in shown and f"[{KEY}] not answered yet" in shown, shown


def test_nbval_the_lint_and_the_exercise_tests_pick_it_up(course: Path) -> None:
    """One pytest run in the scratch course, with its pyproject.toml (strict nbval, the sanitize file)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-q", "-k", "99 or every_exercise_has_a_solution",
                           "notebooks", "tests"], cwd=course, env=_env(course),
                          capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    outcomes = dict((name, status) for status, name in re.findall(r"^(PASSED|FAILED|ERROR) (.+?)(?: - .*)?$", out, re.M))
    cells = sum(cell.cell_type == "code" for cell in nbformat.read(TEMPLATE, as_version=4).cells)
    expected = [f"notebooks/{NAME}.ipynb::Cell {i}" for i in range(cells)] + [
        f"tests/test_notebooks_lint.py::{test}[{NAME}]"
        for test in ("test_notebook_is_clean", "test_notebook_follows_the_skeleton", "test_every_figure_is_an_image")
    ] + [f"tests/test_exercises.py::{test}[{KEY}]"
         for test in ("test_self_check_accepts_the_solution", "test_self_check_rejects_wrong_answers",
                      "test_near_misses_are_rejected_at_the_boundary",
                      "test_the_notebook_asks_the_question_the_checker_answers")
         ] + ["tests/test_exercises.py::test_every_exercise_has_a_solution_and_wrong_answers"]
    assert {name: outcomes.get(name, "not collected") for name in expected} == dict.fromkeys(expected, "PASSED"), out
    assert done.returncode == 0, out


def test_the_site_has_its_page(course: Path, tmp_path: Path) -> None:
    pages = _tool("site").build(tmp_path / "site", root=course)
    assert [page.html_name for page in pages] == [f"{NAME}.html"]
    page = (tmp_path / "site" / f"{NAME}.html").read_text()
    assert "global batch: 512 images per step" in page
    assert f'href="{NAME}.html"' in (tmp_path / "site" / "index.html").read_text()


def test_the_learner_edition_holds_it(course: Path, tmp_path: Path) -> None:
    report = _tool("student").build(tmp_path / "student", root=course)
    assert list(report) == [f"{NAME}.ipynb"]
    learner = nbformat.read(tmp_path / "student" / "notebooks" / f"{NAME}.ipynb", as_version=4)
    assert learner.cells == nbformat.read(course / "notebooks" / f"{NAME}.ipynb", as_version=4).cells
    assert not (tmp_path / "student" / "instructor").exists()


def test_every_file_the_recipe_names_exists() -> None:
    """A renamed file or folder breaks the recipe: each path it names in backquotes must exist."""
    text = RECIPE.read_text()
    named = set(re.findall(r"`((?:notebooks|tools|tests|course_lib|instructor|docs|source_code|benchmarks)/"
                           r"[\w./-]*?|Makefile|README\.md|pyproject\.toml)(?:::\w+)?`", text))
    missing = sorted(path for path in named if "NN" not in path and not (ROOT / path).exists())
    assert named and not missing, f"docs/extending.md names paths that do not exist: {missing}"
