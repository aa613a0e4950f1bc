"""Every ``COURSE_*`` environment variable the course reads or sets, against the table in docs/variables.md (issue 47).

Usage::

    .venv/bin/python tools/maintainers/course_variables.py            # each variable and the files that use it
    .venv/bin/python tools/maintainers/course_variables.py --check    # exit 1, saying what, when docs/variables.md's table
                                                          # misses a variable or lists one the code does not use

What is scanned (:data:`SCANNED`): the code of course_lib/, source_code/, tools/, benchmarks/, tests/, cluster/,
classroom/ and .ci/, the Makefile and conftest.py: ``.py`` files, and shell-like ones (``.sh``, ``.sbatch``, ``.mk``,
``Makefile``, any file starting with a shell ``#!``). Not the notebooks (they reach the variables through course_lib)
nor the Markdown pages (they describe, not use).

The rule that tells an environment variable from a Python name that merely starts with ``COURSE_``:

* Python (read with :mod:`ast`, so comments never count and docstrings are left out): a string literal that is
  exactly the name (``os.environ.get("COURSE_X")``, ``os.environ["COURSE_X"]``, ``monkeypatch.setenv("COURSE_X",
  ...)``, ``proc.environ().get("COURSE_X")``, an environment dict's key ``{"COURSE_X": ...}``, and a module's name for
  it, ``PLACEMENT_ENV = "COURSE_PLACEMENT"``); a literal joined to such a name (``MARKER + "_OF"`` with ``MARKER =
  "COURSE_TEST_SESSION"``: ``COURSE_TEST_SESSION_OF``); and, inside any other string, the name written as a variable
  is written in a shell, ``$COURSE_X`` / ``${COURSE_X`` or ``COURSE_X=`` (a remedy such as ``"COURSE_FORCE_SETUP=1
  make setup"``, an ``--export=...,COURSE_DIR=...``). A bare identifier (``COURSE_DIR = course_root()``) never is.
* shell, Makefile: ``$COURSE_X``, ``${COURSE_X``, ``$(COURSE_X)`` or ``COURSE_X=`` (``:=``, ``?=``, ``export``),
  outside ``#`` comments.

A safety net keeps the rule honest: every ``COURSE_*`` word in the scanned files (comments and docstrings included)
must be a variable found by the rule somewhere or one of :data:`CONSTANTS`, the Python names that are not variables;
any other word is reported as unclassified, so that a variable used in a way the rule does not see fails the check
instead of going unlisted.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The table this tool checks, relative to the course folder.
TABLE = Path("docs") / "variables.md"
#: What is scanned, relative to the course folder (folders are walked; missing ones are skipped).
SCANNED = ("course_lib", "source_code", "tools", "benchmarks", "tests", "cluster", "classroom", ".ci", "Makefile",
           "conftest.py")
#: Folders never walked into.
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".venv"})
#: Files left out: this tool and its test name every variable (and plant made-up ones) in order to check them.
SKIPPED_FILES = frozenset({"tools/maintainers/course_variables.py", "tests/test_variables.py"})
#: Python names that start with ``COURSE_`` but are constants, not environment variables, and why.
CONSTANTS: dict[str, str] = {
    "COURSE_DIR": "course_lib/environment/lab.py: the course folder (course_root()), the lab's root; the variable of "
                  "the same name is the cluster scripts' (cluster/mpirun_horovod.sh, cluster/slurm_horovod.sbatch)",
    "COURSE_HOROVOD_ENV": "benchmarks/run.py: the Horovod settings the course's benchmark rows pass to horovodrun "
                          "(HOROVOD_CYCLE_TIME=5), a dict in code, never read from the environment",
    "COURSE_TITLE": "tools/site.py: the website's title",
    "COURSE_LIMIT_MIN": "tools/maintainers/reading_time.py: the day's reading-time budget in minutes (issue 45)",
}

NAME = re.compile(r"\bCOURSE_[A-Z0-9_]*[A-Z0-9]\b")
EXACT = re.compile(r"COURSE_[A-Z0-9_]*[A-Z0-9]")
# Inside a string or a shell line: $COURSE_X, ${COURSE_X, $(COURSE_X (make), COURSE_X= (also :=, ?=, +=).
SHELLISH = re.compile(r"\$[{(]?(COURSE_[A-Z0-9_]*[A-Z0-9])\b|\b(COURSE_[A-Z0-9_]*[A-Z0-9])\s*[:?+]?=")
SHELL_SUFFIXES = frozenset({".sh", ".sbatch", ".mk"})
# A shell comment: a line's # at its start or after a blank (not ${#array[@]}, not $#).
SHELL_COMMENT = re.compile(r"(^|\s)#.*$")


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        top = root / name
        if top.is_file():
            found.append(top)
        elif top.is_dir():
            found.extend(path for path in sorted(top.rglob("*"))
                         if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(root).parts))
    return [path for path in found if path.relative_to(root).as_posix() not in SKIPPED_FILES]


def _is_shell(path: Path) -> bool:
    if path.suffix in SHELL_SUFFIXES or path.name == "Makefile":
        return True
    if path.suffix:
        return False
    try:
        with path.open("rb") as handle:
            first = handle.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and (b"sh" in first.split(b"/")[-1])


def python_variables(source: str) -> set[str]:
    """The ``COURSE_*`` environment variables a Python source uses, by the module docstring's rule.

    Strings that name no variable are left out: docstrings (of the module, classes and functions) and the entries
    of ``__all__`` (``"COURSE_DIR"`` there is lab.py's constant).
    """
    if "COURSE_" not in source:
        return set()
    skip: set[int] = set()
    strings: list[ast.Constant] = []
    names: dict[str, str] = {}   # NAME = "COURSE_X"
    joined: list[tuple[str, str]] = []   # NAME + "_SUFFIX"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and "COURSE_" in node.value:
                strings.append(node)
        elif isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        elif isinstance(node, ast.Assign):
            if any(isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets):
                skip.update(id(item) for item in ast.walk(node.value))
            elif isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) \
                    and EXACT.fullmatch(node.value.value):
                names.update((t.id, node.value.value) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Name) \
                and isinstance(node.right, ast.Constant) and isinstance(node.right.value, str):
            joined.append((node.left.id, node.right.value))
    found: set[str] = set()
    for node in strings:
        if id(node) in skip:
            continue
        if EXACT.fullmatch(node.value):
            found.add(node.value)
        else:
            found.update(a or b for a, b in SHELLISH.findall(node.value))
    found.update(names[name] + suffix for name, suffix in joined
                 if name in names and EXACT.fullmatch(names[name] + suffix))
    return found


def shell_variables(source: str) -> set[str]:
    """The ``COURSE_*`` environment variables a shell script or Makefile uses (``#`` comments left out)."""
    found: set[str] = set()
    for line in source.splitlines():
        line = SHELL_COMMENT.sub("", line)
        found.update(a or b for a, b in SHELLISH.findall(line))
    return found


def _scan(root: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(variable -> files using it, every COURSE_* word -> files holding it)."""
    variables: dict[str, set[str]] = {}
    words: dict[str, set[str]] = {}
    for path in _files(root):
        if path.suffix == ".py":
            kind = "python"
        elif _is_shell(path):
            kind = "shell"
        else:
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        where = path.relative_to(root).as_posix()
        for word in NAME.findall(source):
            words.setdefault(word, set()).add(where)
        try:
            used = python_variables(source) if kind == "python" else shell_variables(source)
        except SyntaxError:
            used = set()
        for name in used:
            variables.setdefault(name, set()).add(where)
    return ({k: sorted(v) for k, v in sorted(variables.items())}, {k: sorted(v) for k, v in sorted(words.items())})


def scan(root: Path) -> dict[str, list[str]]:
    """Every ``COURSE_*`` environment variable the code under ``root`` uses -> the files (relative paths) using it.

    Args:
        root: The course folder (or a scratch tree laid out like it).

    Returns:
        Variable name -> sorted relative paths, sorted by name. :data:`CONSTANTS` are never in it as such (the same
        name can still be a variable elsewhere: ``COURSE_DIR`` in the cluster scripts).
    """
    return _scan(root)[0]


def table(root: Path) -> dict[str, list[str]]:
    """The variables docs/variables.md's table lists -> the paths of its "read by" column (empty when no table)."""
    path = root / TABLE
    if not path.is_file():
        return {}
    rows: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\|\s*`(COURSE_[A-Z0-9_]+)`\s*\|([^|]*)\|([^|]*)\|", line)
        if match:
            rows[match.group(1)] = re.findall(r"`([^`]+)`", match.group(3))
    return rows


def problems(root: Path) -> list[str]:
    """What the table and the code disagree on: missing and stale rows, read-by paths that do not exist, and
    ``COURSE_*`` words that are neither a variable nor a known constant. Empty when they agree."""
    variables, words = _scan(root)
    rows = table(root)
    found: list[str] = []
    if not (root / TABLE).is_file():
        found.append(f"{TABLE} is missing")
    for name, paths in variables.items():
        if name not in rows:
            found.append(f"missing from {TABLE}: {name} (used in {', '.join(paths)})")
    for name in rows:
        if name not in variables:
            found.append(f"stale in {TABLE}: {name} (no scanned file uses it as an environment variable)")
    for name, paths in rows.items():
        for where in paths:
            if not (root / where).exists():
                found.append(f"{TABLE}: {name}'s row names {where}, which does not exist")
    for word, paths in words.items():
        if word not in variables and word not in CONSTANTS:
            found.append(f"unclassified: {word} in {', '.join(paths)} is neither an environment variable by this "
                         "tool's rule nor one of its CONSTANTS (tools/maintainers/course_variables.py)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"compare with {TABLE}; exit 1 on a difference")
    parser.add_argument("--root", type=Path, default=ROOT, help="the course folder (default: this checkout)")
    args = parser.parse_args(argv)
    if args.check:
        found = problems(args.root)
        for line in found:
            print(line)
        if found:
            return 1
        print(f"{TABLE}: all {len(scan(args.root))} COURSE_* variables listed, none stale")
        return 0
    for name, paths in scan(args.root).items():
        print(f"{name}\t{', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
