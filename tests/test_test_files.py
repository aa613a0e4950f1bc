"""The test-file rule as docs/extending.md states it ("Which test"): every course_lib module is imported by a test.

Measured on 2026-11-28 (issue 47, item 6), after the machine/ and checks/ sub-packages and the split of
lessons/ablation.py: of 85 modules (``__init__`` files left out), 43 have a test file of their own
(``tests/test_<module>.py``) and 76 are imported by at least one test. The 9 in :data:`TESTED_THROUGH_USERS`
are tested only through the modules and scripts that use them; the list may shrink (a test that imports one of
them fails this file until its name is taken out) but never grow: a new module is imported by a test.
Measured again on 2026-12-02 (issue 54, item 2), after lessons/ became one package per notebook topic plus
``common/`` (with ``common/ring.py`` new, ``checks/`` gone into the topics): 85 modules, 43 with a test file of
their own, 76 imported by a test, the same 9 tested through their users.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Modules (by file name, so that a move between packages keeps them) that no test imports, and where they are tested.
TESTED_THROUGH_USERS = frozenset({
    "display",        # lessons: through lessons.horovod.widgets and the notebooks
    "trial_runner",   # lessons: through lessons.large_batch.trials (tests/test_trial_runner.py)
    "supervise",      # runner: through runner.launchers.workers (tests/test_multiworker.py)
    "watchdog",       # runner: through runner.procs.processes, i.e. every launch (tests/test_watchdog.py, test_startup_race.py)
    "autograph",      # training: through the Horovod scripts (tests/test_scripts.py, test_private_apis.py)
    "events",         # training: the JSON lines of the callbacks, meters and scripts (tests/test_callbacks.py, ...)
    "files",          # training: atomic writes, through the data, checkpoint and cache modules
    "report",         # training: through source_code/mirrored_fmnist.py (tests/test_scripts.py)
    "seeding",        # training: through the callbacks, trials and scripts (tests/test_fixed_threads.py, ...)
})


def course_modules(root: Path = ROOT) -> set[str]:
    """Every course_lib module's dotted name, ``__init__`` files left out."""
    return {".".join(path.relative_to(root).with_suffix("").parts)
            for path in (root / "course_lib").rglob("*.py") if path.name != "__init__.py"}


def imported_by_tests(root: Path = ROOT) -> set[str]:
    """Every dotted name a file under tests/ imports, anywhere in it (``from a import b`` gives ``a`` and ``a.b``)."""
    names: set[str] = set()
    for path in (root / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def violations(root: Path = ROOT) -> list[str]:
    modules, imported = course_modules(root), imported_by_tests(root)
    untested = {module for module in modules if module not in imported}
    stems = {module.rpartition(".")[2] for module in untested}
    return ([f"{module}: no test imports it (docs/extending.md, 'Which test')"
             for module in sorted(untested) if module.rpartition(".")[2] not in TESTED_THROUGH_USERS]
            + [f"{stem}: a test imports it now (or it is gone); take it out of TESTED_THROUGH_USERS"
               for stem in sorted(TESTED_THROUGH_USERS - stems)])


def test_every_module_is_imported_by_a_test_but_the_listed_older_ones() -> None:
    assert violations() == []


def test_a_new_module_that_no_test_imports_fails_it(tmp_path: Path) -> None:
    (tmp_path / "course_lib" / "training").mkdir(parents=True)
    for name in ("fresh_helper", "files", "seeding"):
        (tmp_path / "course_lib" / "training" / f"{name}.py").write_text("X = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_other.py").write_text("from course_lib.training import files\n")
    found = violations(tmp_path)
    assert "course_lib.training.fresh_helper: no test imports it (docs/extending.md, 'Which test')" in found
    assert "files: a test imports it now (or it is gone); take it out of TESTED_THROUGH_USERS" in found
    assert not [line for line in found if line.startswith(("course_lib.training.seeding", "seeding"))]
