"""The package's layers are real: imports only go one way, and the scripts use the training layer only.

Layers, lowest first: ``training`` → ``runner``, then two siblings on top of both: ``lessons`` (what the
notebooks call) and ``environment`` (the learner's machine: doctor, lab). A module may import from its own
layer and the layers it sits on (:data:`MAY_IMPORT`), never from its sibling; ``source_code/`` may import ``course_lib.training`` only
(so a learner can carry a script and that one folder to a cluster); no two modules import each other,
directly or round a longer loop. ``tests/import_graph.py`` reads every import form with ``ast``
(``from package import module``, relative imports, ``import a.b.c``, imports inside functions,
``importlib.import_module("...")``), so no way of writing an import can hide a dependency; the tests at
the end plant a cycle and an upward import of each form in a scratch copy and watch the checks fail.

Inside ``lessons``, a notebook's topic is a package (``lessons/large_batch/`` for ``notebooks/04_large_batch.ipynb``)
and a helper two notebooks use is in ``lessons/common/``: no topic imports another topic, ``common/`` imports no
topic, and a notebook imports from ``lessons`` its own topic and ``common/`` only (:func:`topic_problems`).
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from import_graph import describe, find_cycle, graph, imports, modules

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "course_lib"
ORDER = ["training", "runner", "lessons", "environment", "assessment"]
#: The layers each layer may import (besides itself): a graph, not a line (lessons and environment are siblings).
MAY_IMPORT = {"training": set(), "runner": {"training"}, "lessons": {"training", "runner"},
              "environment": {"training", "runner"},
              "assessment": {"training", "runner", "lessons", "environment"}}  # the grader (issue 55): on top


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


def wrong_way_imports(root: Path) -> list[str]:
    """Every import in ``root/course_lib`` that goes up the layers, names no layer, or cannot be read."""
    edges, problems = graph(root, PACKAGE)
    for source, found in edges.items():
        own = _layer(source)
        if own is None:  # course_lib/__init__.py and __main__.py (the command line) sit on top
            continue
        for edge in found:
            layer = _layer(edge.target)
            if layer is None:
                problems.append(f"{source}:{edge.line} imports {edge.target}: name a layer module")
            elif layer != own and layer not in MAY_IMPORT[own]:
                problems.append(f"{source}:{edge.line} ({own}) imports {edge.target} ({layer}): this layer "
                                f"may import only {sorted(MAY_IMPORT[own] | {own})} (docs/architecture.md)")
    return problems


def import_cycle(root: Path) -> str | None:
    """One import cycle among the modules of ``root/course_lib``, written out, or None."""
    edges, _ = graph(root, PACKAGE)
    cycle = find_cycle(edges)
    return describe(cycle) if cycle else None


def script_problems(root: Path) -> list[str]:
    """Every import of ``root/source_code/*.py`` into course_lib outside the training layer."""
    known = modules(root, PACKAGE)
    problems = []
    for path in sorted((root / "source_code").glob("*.py")):
        edges, unreadable = imports(path, path.stem, known, PACKAGE)
        problems += unreadable
        problems += [f"source_code/{path.name}:{e.line} imports {e.target}: scripts may use "
                     f"course_lib.training only" for e in edges if _layer(e.target) != "training"]
    return problems


LESSONS = f"{PACKAGE}.lessons"
COMMON = "common"


def _topic(module: str) -> str | None:
    """The lessons package a module of the lessons layer sits in (``large_batch``, ``common``), or None."""
    parts = module.split(".")
    return parts[2] if module.startswith(LESSONS + ".") and len(parts) > 2 else None


def _notebook_topics(root: Path) -> dict[str, Path]:
    return {path.stem.split("_", 1)[1]: path for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))}


def _notebook_imports(path: Path) -> list[tuple[str, int]]:
    """The modules a notebook's code cells import (``from m import n`` gives ``m`` and ``m.n``), with the cell."""
    found = []
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        try:
            kept = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
            tree = ast.parse("\n".join(kept))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(alias.name, index) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found += [(f"{node.module}.{alias.name}", index) for alias in node.names]
    return found


def topic_problems(root: Path) -> list[str]:
    """What breaks "one package per notebook topic" in ``root``: a lessons module outside a topic or ``common/``,
    a package named by no notebook, a topic importing another topic, ``common/`` importing a topic, a notebook
    importing another notebook's topic."""
    topics = _notebook_topics(root)
    lessons = root / PACKAGE / "lessons"
    problems = [f"lessons/{path.name}: a lessons module sits in a topic package or in common/"
                for path in sorted(lessons.glob("*.py")) if path.name != "__init__.py"]
    problems += [f"lessons/{path.name}/ is named by no notebook (notebooks/NN_{path.name}.ipynb) and is not common/"
                 for path in sorted(lessons.iterdir())
                 if path.is_dir() and path.name not in {*topics, COMMON, "__pycache__"}]
    edges, _ = graph(root, PACKAGE)
    for source, found in edges.items():
        own = _topic(source)
        if own is None:
            continue
        for edge in found:
            target = _topic(edge.target)
            if edge.target == LESSONS:
                problems.append(f"{source}:{edge.line} imports {LESSONS}: import from a topic or common/")
            elif target is None or target == own or target == COMMON and own != COMMON:
                continue
            elif own == COMMON:
                problems.append(f"{source}:{edge.line} imports {edge.target}: common/ imports no topic")
            else:
                problems.append(f"{source}:{edge.line} imports {edge.target}: a topic imports no other topic "
                                f"(move what both use to common/)")
    for topic, path in topics.items():
        for name, cell in _notebook_imports(path):
            target = _topic(name)
            if name.startswith(LESSONS) and target not in {topic, COMMON}:
                problems.append(f"{path.name} (cell {cell}) imports {name}: a notebook imports its own topic "
                                f"({LESSONS}.{topic}) and common/ only")
    return problems


def test_every_module_sits_in_a_layer() -> None:
    package = ROOT / PACKAGE
    top = sorted(p.name for p in package.glob("*.py"))
    assert top == ["__init__.py", "__main__.py"], f"modules outside the layer folders: {top}"
    assert sorted(p.name for p in package.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ORDER)


def test_imports_go_one_way() -> None:
    assert wrong_way_imports(ROOT) == []


def test_no_import_cycles_between_modules() -> None:
    assert import_cycle(ROOT) is None


def test_one_package_per_notebook_topic_and_no_topic_imports_another() -> None:
    assert topic_problems(ROOT) == []


def test_scripts_import_only_the_training_layer() -> None:
    assert script_problems(ROOT) == []


#: The runner's process tier (issue 54): argv, env, cwd, deadline, stop, grace, process groups. Under everything else of
#: the runner, it imports only itself (no launcher, slots, options or machine facts).
PROCESS_TIER = f"{PACKAGE}.runner.procs"


def process_tier_problems(root: Path) -> list[str]:
    """Every import from ``runner/procs/`` of a module outside it."""
    edges, _ = graph(root, PACKAGE)
    return [f"{source}:{edge.line} imports {edge.target}: the process tier knows no launcher, slots or options"
            for source, found in edges.items() if source == PROCESS_TIER or source.startswith(PROCESS_TIER + ".")
            for edge in found if not (edge.target == PROCESS_TIER or edge.target.startswith(PROCESS_TIER + "."))]


def test_the_process_tier_imports_only_itself(tmp_path: Path) -> None:
    assert process_tier_problems(ROOT) == []
    scratch = tmp_path / "copy"
    shutil.copytree(ROOT / PACKAGE, scratch / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    planted = scratch / PACKAGE / "runner" / "procs" / "processes.py"
    planted.write_text(planted.read_text() + "\n\ndef planted():\n    from course_lib.runner.slots import acquire\n")
    assert any("runner.slots" in problem for problem in process_tier_problems(scratch))


def arrows_and_floors(root: Path, place: str) -> tuple[int, int]:
    """Module-to-module arrows inside ``place`` (lazy and TYPE_CHECKING imports included) and its floors (the
    longest chain of arrows, counted in modules)."""
    edges, _ = graph(root, PACKAGE)
    inside = lambda name: name == place or name.startswith(place + ".")  # noqa: E731
    arrows = {(e.source, e.target) for source, found in edges.items() if inside(source) and source != place
              for e in found if inside(e.target) and e.target != source}
    floor: dict[str, int] = {}

    def height(module: str) -> int:
        if module not in floor:
            floor[module] = 1 + max((height(t) for s, t in arrows if s == module), default=0)
        return floor[module]

    return len(arrows), max((height(m) for m in modules(root, PACKAGE) if inside(m) and m != place), default=0)


def test_the_runner_stays_shallow() -> None:
    """Issue 54: two tiers and one engine took the runner from 6 floors and 28 arrows to 5 and 20; no more."""
    arrows, floors = arrows_and_floors(ROOT, f"{PACKAGE}.runner")
    assert floors <= 5 and arrows <= 20, (floors, arrows)


def test_the_graph_sees_the_imports_of_today() -> None:
    """Edges written in the forms the old check dropped are in the graph (a guard against a blind reader)."""
    edges, _ = graph(ROOT, PACKAGE)
    targets = {e.target for e in edges["course_lib.training.data"]}
    assert "course_lib.training.tfds_cache" in targets  # from course_lib.training import tfds_cache


# --- The checks bite: a cycle and an upward import of every form, planted in a scratch copy ----------------

# epochs.py gets one of these lines (pipeline.py already imports epochs), closing pipeline <-> epochs.
CYCLE_FORMS = {
    "from package import module": "from course_lib.training import pipeline\n",
    "from module import name": "from course_lib.training.pipeline import make_dataset\n",
    "import a.b.c": "import course_lib.training.pipeline\n",
    "import a.b.c as x": "import course_lib.training.pipeline as planted\n",
    "relative from . import module": "from . import pipeline\n",
    "relative from .module import name": "from .pipeline import make_dataset\n",
    "relative from ..package import module": "from ..training import pipeline\n",
    "lazy, inside a function": "def planted():\n    from course_lib.training import pipeline\n",
    "under TYPE_CHECKING": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from course_lib.training import pipeline\n",
    "importlib.import_module": "import importlib\n\n\ndef planted():\n"
                               "    return importlib.import_module('course_lib.training.pipeline')\n",
    "import_module, relative with package=": "from importlib import import_module\n\n\ndef planted():\n"
                                             "    return import_module('.pipeline', package='course_lib.training')\n",
    "__import__": "def planted():\n    return __import__('course_lib.training.pipeline')\n",
}

# training/epochs.py gets one of these lines: the training layer reaching up into the runner.
UPWARD_FORMS = {
    "from package import module": "from course_lib.runner import launch\n",
    "from package import name": "from course_lib.runner import LaunchOptions\n",
    "from module import name": "from course_lib.runner.launch import run_horovod\n",
    "import a.b.c": "import course_lib.runner.launch\n",
    "relative from ..package import module": "from ..runner import launch\n",
    "relative from ..package.module import name": "from ..runner.launch import run_horovod\n",
    "lazy, inside a function": "def planted():\n    from ..runner.launch import run_horovod\n",
    "importlib.import_module": "import importlib\n\n\ndef planted():\n"
                               "    return importlib.import_module('course_lib.runner.launch')\n",
}


def _scratch(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + "\n\n" + text)


def test_the_scratch_copy_is_clean(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    assert import_cycle(root) is None and wrong_way_imports(root) == []


@pytest.mark.parametrize("line", CYCLE_FORMS.values(), ids=CYCLE_FORMS.keys())
def test_a_planted_cycle_of_each_form_fails(tmp_path: Path, line: str) -> None:
    root = _scratch(tmp_path)
    _append(root / PACKAGE / "training" / "epochs.py", line)
    cycle = import_cycle(root)
    assert cycle is not None, f"a cycle written {line!r} went unseen"
    assert "course_lib.training.pipeline" in cycle and "course_lib.training.epochs" in cycle, cycle


def test_a_cycle_through_a_package_init_fails(tmp_path: Path) -> None:
    """``from course_lib.training import name`` where the package re-exports it: the edge is to __init__.py."""
    root = _scratch(tmp_path)
    _append(root / PACKAGE / "training" / "__init__.py", "from course_lib.training.pipeline import make_dataset\n")
    _append(root / PACKAGE / "training" / "epochs.py", "from course_lib.training import make_dataset\n")
    cycle = import_cycle(root)
    assert cycle is not None and "course_lib.training" in cycle.split(" -> ")[1], cycle


@pytest.mark.parametrize("line", UPWARD_FORMS.values(), ids=UPWARD_FORMS.keys())
def test_a_planted_upward_import_of_each_form_fails(tmp_path: Path, line: str) -> None:
    root = _scratch(tmp_path)
    _append(root / PACKAGE / "training" / "epochs.py", line)
    problems = wrong_way_imports(root)
    assert len(problems) == 1 and "course_lib.training.epochs:" in problems[0], problems
    assert "imports course_lib.runner" in problems[0] and "(runner)" in problems[0], problems


@pytest.mark.parametrize("line", ["import_module(name)\n", "__import__(name)\n",
                                  "import_module('.epochs')\n", "from ... import planted\n",
                                  "import course_lib.training.no_such_module\n"],
                         ids=["non-literal import_module", "non-literal __import__", "relative with no package",
                              "relative past the top", "a module that does not exist"])
def test_an_import_the_check_cannot_read_fails(tmp_path: Path, line: str) -> None:
    root = _scratch(tmp_path)
    _append(root / PACKAGE / "training" / "epochs.py",
            "from importlib import import_module\n\n\ndef planted(name):\n    " + line.replace("\n", "\n    "))
    problems = wrong_way_imports(root)
    assert len(problems) == 1 and "course_lib.training.epochs:" in problems[0], problems


@pytest.mark.parametrize("line", ["from course_lib.runner import launch\n",
                                  "import course_lib.lessons.common.scaling\n",
                                  "def main():\n    from course_lib import environment\n"])
def test_a_script_reaching_past_the_training_layer_fails(tmp_path: Path, line: str) -> None:
    root = _scratch(tmp_path)
    (root / "source_code").mkdir()
    (root / "source_code" / "planted.py").write_text("from course_lib.training import flags\n" + line)
    problems = script_problems(root)
    assert len(problems) == 1 and problems[0].startswith("source_code/planted.py:"), problems


def test_siblings_do_not_import_each_other(tmp_path: Path) -> None:
    """lessons and environment both sit on runner and training; neither may import the other."""
    root = _scratch(tmp_path)
    (root / PACKAGE / "environment" / "bad.py").write_text("from course_lib.lessons import scaling\n")
    (root / PACKAGE / "lessons" / "bad.py").write_text("from course_lib.environment import doctor\n")
    problems = wrong_way_imports(root)
    assert len(problems) == 2 and all("may import only" in p for p in problems), problems


def _scratch_with_notebooks(tmp_path: Path) -> Path:
    root = _scratch(tmp_path)
    (root / "notebooks").mkdir()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        shutil.copy(path, root / "notebooks" / path.name)
    return root


def test_the_scratch_copy_keeps_the_topic_rule(tmp_path: Path) -> None:
    assert topic_problems(_scratch_with_notebooks(tmp_path)) == []


@pytest.mark.parametrize(("planted", "line", "expected"), [
    ("large_batch/ladder.py", "from course_lib.lessons.communication import knobs\n",
     "imports course_lib.lessons.communication.knobs: a topic imports no other topic"),
    ("large_batch/ladder.py", "def planted():\n    from ..horovod.widgets import ControlPanel\n",
     "imports course_lib.lessons.horovod.widgets: a topic imports no other topic"),
    ("common/measured.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from course_lib.lessons.large_batch import trials\n",
     "imports course_lib.lessons.large_batch.trials: common/ imports no topic"),
    ("common/display.py", "import course_lib.lessons.frameworks.frameworks\n",
     "imports course_lib.lessons.frameworks.frameworks: common/ imports no topic"),
], ids=["topic to topic", "topic to topic, lazy and relative", "common to topic, TYPE_CHECKING",
        "common to topic, import a.b.c"])
def test_a_planted_import_across_topics_fails(tmp_path: Path, planted: str, line: str, expected: str) -> None:
    root = _scratch_with_notebooks(tmp_path)
    _append(root / PACKAGE / "lessons" / planted, line)
    problems = topic_problems(root)
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_module_outside_the_topics_or_a_notebook_reaching_across_fails(tmp_path: Path) -> None:
    root = _scratch_with_notebooks(tmp_path)
    (root / PACKAGE / "lessons" / "loose.py").write_text('"""A helper of no topic."""\n')
    (root / PACKAGE / "lessons" / "sharding").mkdir()
    (root / PACKAGE / "lessons" / "sharding" / "__init__.py").write_text('"""A topic of no notebook."""\n')
    notebook = root / "notebooks" / "04_large_batch.ipynb"
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "planted", "metadata": {}, "outputs": [],
                        "source": ["from course_lib.lessons.communication import knobs\n"]})
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    problems = topic_problems(root)
    assert len(problems) == 3, problems
    assert any("lessons/loose.py: a lessons module sits in a topic package" in p for p in problems), problems
    assert any("lessons/sharding/ is named by no notebook" in p for p in problems), problems
    assert any(p.startswith("04_large_batch.ipynb (cell ") and "imports course_lib.lessons.communication.knobs"
               in p for p in problems), problems
