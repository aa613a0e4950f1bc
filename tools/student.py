"""Build the learner edition of the course (``make student``): ``build/student/``.

Usage::

    .venv/bin/python tools/student.py                    # -> build/student/
    .venv/bin/python tools/student.py --out /srv/course  # anywhere else

The learner edition holds what a learner needs and nothing an instructor keeps: the notebooks
(learner version, below), ``course_lib/``, ``source_code/``, ``cluster/`` and ``tools/localcluster/`` (notebook
06 reads and runs them), the set-up (``tools/setup.sh`` with ``tools/python_range.sh``, ``tools/wheel_cache.py``, ``tools/uv_install.py``,
``requirements/``, ``pyproject.toml``, ``environment.yml``), ``docs/architecture.md``, the graded assessment
(``assessment/``: :func:`add_assessment`), a learner
README and a learner Makefile (``make lab``, ``make doctor``; the data is prepared by set-up with
``python -m course_lib prepare-data``). It has no ``instructor/``, no ``tests/``, no maintainers' tools
(``tools/maintainers/``) and no notebook test configuration.

**A path a notebook cites is in the edition** (issue 52): the one rule for citations. Every course file
that a learner notebook shows by its path (``docs/run_times.json`` in every header, ``benchmarks/README.md``
in 05), in its Markdown, its code or its outputs, is copied into the edition beside :data:`COPIED`
(:func:`cited_paths`); text inside an HTML comment is not shown, so it does not count. A notebook may not cite
what the edition withholds (:data:`WITHHELD`: answers, tests, maintainers' tools): such a citation, and one of a
folder the edition lacks, is *dangling*; the build warns with the notebook, the cell and the path, and
``tests/test_student.py`` fails on it.

How a source notebook marks what learners must not see (cell tags, set in JupyterLab's property
inspector or with ``jupyter nbconvert``; nbgrader's markers are understood too):

``solution``
    The cell is removed from the learner edition, with its outputs. Put an exercise's worked answer in
    such a cell right after the learner's placeholder cell (``answer = None``): the source notebook runs
    both (its self-check then shows the right answer), the learner edition keeps only the placeholder.
    The code cell right after a ``solution`` cell (the self-check, or the experiment the solution set up)
    keeps its source but loses its outputs and is marked unexecuted, as ``solution-output`` does: its committed
    output shows the solved state, which the learner's run will not. So tagging a solution cell is all a
    notebook needs: put it between the learner's placeholder and the cell that uses it.
``solution-output``
    The cell stays, its outputs are cleared and it is marked unexecuted: for another cell whose
    committed output shows the solved answer. nbval runs an unexecuted cell without comparing its
    outputs, so the learner edition still passes strict nbval.
``### BEGIN SOLUTION`` / ``### END SOLUTION`` (nbgrader's ClearSolutions markers, inside a code cell)
    The lines between the markers are replaced by ``raise NotImplementedError(...)`` at the same
    indentation, the cell's outputs are cleared, and the cell is tagged ``raises-exception`` (nbval's tag:
    the learner's stub may raise where the solution did not).
``instructor``
    A markdown or code cell of notes for instructors only: removed like ``solution``.

Where the answers are, and why the learner edition cannot read them: a notebook's worked solution is a
``solution`` cell, left out of the learner copy (with ``instructor/`` and ``tests/``, which hold the rest).
The learner's ``course_lib`` holds no answer value: the self-checks compute what they compare with from the
learner's own code or run (each notebook topic's ``lessons.<topic>.checks``) or with
the course's functions, and word answers are salted digests. We chose leaving solutions out over hashing every
answer: a hash of a small integer or of a rounded real is found by trying them all, so it hides nothing, and a
hash cannot accept "within 0.1 %"; a check that runs the learner's code has no single value to hide. ``tests/test_student.py`` checks the tool on a
fixture notebook and the real build.

Introduced for docs/instructors.md (issue 18); not part of ``course_lib`` (learners do not need it).
"""

from __future__ import annotations

import argparse
import copy
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import nbformat

ROOT = Path(__file__).resolve().parents[1]
REMOVED_TAGS = ("solution", "instructor")
CLEARED_TAG = "solution-output"
BEGIN = re.compile(r"^(?P<indent>[ \t]*)#+\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^[ \t]*#+\s*END SOLUTION\s*$")
STUB = 'raise NotImplementedError("your code here")'
# What the learner edition copies from the course folder (folders whole, minus caches).
COPIED = ("course_lib", "source_code", "cluster", "requirements", "pyproject.toml", "environment.yml",
          "tools/setup.sh", "tools/setup_frameworks.sh", "tools/python_range.sh", "tools/wheel_cache.py", "tools/uv_install.py",
          "tools/jupyterlab-overrides.json",
          "tools/localcluster", "docs/architecture.md")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints")
#: Course folders the learner edition never ships, even when a notebook cites a file in them: answers and
#: instructors' notes, the tests, the maintainers' tools. A learner notebook must not cite them.
WITHHELD = ("instructor", "tests", "tools/maintainers")
#: A course path as a notebook writes it: ``docs/run_times.json``, ``instructor/``, ``../source_code/x.py``.
PATH_TOKEN = re.compile(r"(?:\.\./|\./)*[\w.-]+(?:/[\w.-]+)*/?")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)

#: The learner's commands (make lab, make doctor): the course's Makefile includes this file, and the learner
#: edition's Makefile is this file under :data:`LEARNER_HEADER` (one text for both; tests/test_student.py).
LEARNER_MK = "tools/learner.mk"
LEARNER_HEADER = "# Hands-on distributed deep learning with TensorFlow -- learner edition (made by make student).\n"


def learner_makefile(root: Path = ROOT) -> str:
    """The learner edition's Makefile: :data:`LEARNER_MK` of the course folder ``root``, under a learner header."""
    return LEARNER_HEADER + (root / LEARNER_MK).read_text()


LEARNER_README = """\
# Hands-on distributed deep learning with TensorFlow (learner edition)

Jupyter notebooks that teach data-parallel training with `tf.distribute` and Horovod on Fashion-MNIST.
Every number a notebook shows is measured by the notebook on the machine that runs it.

## Start

```bash
make lab      # sets up .venv (Python 3.11-3.13, TensorFlow 2.21 with Keras 2, Horovod 0.28.1) and the data, then starts JupyterLab
```

Open the URL it prints and start with `notebooks/00_setup.ipynb`; go through the notebooks in order.
`make doctor` checks this machine and prints one remedy line for anything missing.
In a classroom, your instructor gives you a URL and a user name instead: you need none of this set-up.

## Exercises

Each notebook ends with exercises. Put your answer in the cell that says `answer = None` (or write the code
the cell asks for), then run the self-check cell below it: it says whether you are right and gives a hint
when you are not. The self-checks compute the answer from the course's own functions or from your own run;
no answer is written down in this folder.

## What is here

| folder | what |
|---|---|
| `notebooks/` | the lessons, numbered in the order to take them (start with 00) |
| `course_lib/` | the companion package the notebooks call (read it: each helper names its notebook) |
| `source_code/` | the training scripts that `horovodrun` launches; they run without the notebooks |
| `docs/architecture.md` | how the pieces fit together |
| `tools/setup.sh`, `requirements/` | the set-up and the exact versions it installs |
| other files a notebook names by path (`docs/run_times.json`, ...) | copied beside the rest, so that every path a notebook names is here |

Your own work goes to `runs/` (created when a notebook first writes there).

## Assessment

`assessment/ddp/assessment.ipynb` is the course's graded assessment (about an hour: code, measure, concepts, one
written answer; 100 points, pass mark 70). Answer it in JupyterLab, save, then `make assess`: it runs your notebook
in a fresh kernel with the assessment's tests (`assessment/tests/`) and prints your score, each part you missed and
why, the rubric of the written answer (not scored here) and a self-issued completion record. Unproctored; retake it as
often as you like.
"""


@dataclass
class Changes:
    """What :func:`learner_notebook` did to one notebook (cell indices are the source notebook's)."""

    removed: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)
    stubbed: list[int] = field(default_factory=list)
    shipped: list[str] = field(default_factory=list)                   # cited files copied for it by build()
    dangling: list[tuple[int, str]] = field(default_factory=list)      # (learner cell, path) the edition lacks


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def strip_solution(source: str) -> str | None:
    """``source`` with every BEGIN/END SOLUTION block replaced by a stub, or None when it has none.

    Raises:
        ValueError: a BEGIN SOLUTION without its END SOLUTION (or the reverse).
    """
    out: list[str] = []
    inside: str | None = None
    found = False
    for line in source.splitlines():
        begin = BEGIN.match(line)
        if begin:
            if inside is not None:
                raise ValueError("BEGIN SOLUTION inside another BEGIN SOLUTION: close the first with END SOLUTION")
            inside, found = begin.group("indent"), True
            out.append(inside + STUB)
        elif END.match(line):
            if inside is None:
                raise ValueError("END SOLUTION without BEGIN SOLUTION")
            inside = None
        elif inside is None:
            out.append(line)
    if inside is not None:
        raise ValueError("BEGIN SOLUTION without END SOLUTION: add the END SOLUTION line")
    return "\n".join(out) if found else None


def _clear(cell: nbformat.NotebookNode) -> None:
    cell.outputs = []
    cell.execution_count = None  # nbval runs an unexecuted reference cell without comparing outputs


def learner_notebook(nb: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, Changes]:
    """The learner version of a source notebook (see the module docstring for the tags), and what changed.

    Args:
        nb: a source notebook (left unchanged).

    Returns:
        The learner notebook and a :class:`Changes` record.

    Raises:
        ValueError: unbalanced nbgrader markers, with the cell's index.
    """
    out = copy.deepcopy(nb)
    changes = Changes()
    cells = []
    after_solution = False
    for index, cell in enumerate(out.cells):
        tags = _tags(cell)
        if any(tag in tags for tag in REMOVED_TAGS):
            changes.removed.append(index)
            after_solution = after_solution or "solution" in tags
            continue
        follows_solution, after_solution = after_solution, False
        if cell.cell_type == "code":
            try:
                stubbed = strip_solution(cell.source)
            except ValueError as exc:
                raise ValueError(f"cell {index}: {exc}") from None
            if stubbed is not None:
                cell.source = stubbed
                _clear(cell)
                if "raises-exception" not in tags:
                    cell.metadata["tags"] = tags + ["raises-exception"]
                changes.stubbed.append(index)
            elif CLEARED_TAG in tags or follows_solution:
                _clear(cell)
                changes.cleared.append(index)
            # What a cell wrote to stderr (TensorFlow's start-up lines, which vary from run to run) is checked,
            # not compared, by the course's tests/notebooks/harness.py; the learner edition ships no conftest, so
            # strict nbval there would compare it: it is left out of the learner's copy.
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("name") != "stderr"]
        cells.append(cell)
    out.cells = cells
    return out, changes


def course_paths(root: Path = ROOT) -> set[str]:
    """The course's files and folders, relative to ``root`` (folders with a trailing ``/``): git's tracked files
    when ``root`` is a git checkout (so no ``.venv/``, ``build/`` or a learner's ``runs/``), else every file."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True,
                                timeout=60).stdout.split("\0")
    except (OSError, subprocess.SubprocessError):
        listed = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    files = {f for f in listed if f}
    return files | {parent.as_posix() + "/" for f in files for parent in PurePosixPath(f).parents
                    if parent.as_posix() != "."}


def _shown_text(cell: nbformat.NotebookNode) -> list[str]:
    """What a learner reads of a cell: its source (Markdown without HTML comments, which render as nothing)
    and its outputs' text."""
    parts = [HTML_COMMENT.sub("", cell.source) if cell.cell_type == "markdown" else cell.source]
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        parts += [str(output.get("text", "")), str(data.get("text/plain", "")), str(data.get("text/markdown", ""))]
    return parts


def cited_paths(nb: nbformat.NotebookNode, known: set[str]) -> list[tuple[int, str]]:
    """``(cell index, path)`` for every course path that ``nb`` shows a learner, in order, each once per cell.

    A citation is a token of the text a learner reads (:func:`_shown_text`) that names a course file (a path
    with a folder, ``docs/run_times.json``, or a top-level file such as ``pyproject.toml``) or a course folder
    written with its slash (``instructor/``); ``../`` and ``./`` in front are dropped.

    Args:
        nb: A notebook (the learner version, to check what a learner reads).
        known: The course's paths, from :func:`course_paths`.

    Introduced for the learner edition (issue 52: the paths it cited, the edition lacked).
    """
    found: list[tuple[int, str]] = []
    for index, cell in enumerate(nb.cells):
        seen: set[str] = set()
        for text in _shown_text(cell):
            for token in PATH_TOKEN.findall(text):
                path = re.sub(r"^(?:\.\./|\./)+", "", token).rstrip(".")
                if "/" in path and path + "/" in known:   # a folder named without its final slash
                    path += "/"
                if path in known and ("/" in path or "." in path) and path not in seen:
                    seen.add(path)
                    found.append((index, path))
    return found


def withheld(path: str) -> bool:
    """Whether ``path`` lies in a folder the learner edition never ships (:data:`WITHHELD`)."""
    return any(path == folder + "/" or path.startswith(folder + "/") for folder in WITHHELD)


def build(dest: Path, root: Path = ROOT) -> dict[str, Changes]:
    """Write the learner edition of the course folder ``root`` into ``dest`` (replaced if it exists).

    Args:
        dest: the output folder (``build/student``); must not be ``root`` itself or hold it.
        root: the course folder.

    Returns:
        The changes per notebook name.

    Raises:
        ValueError: ``dest`` would overwrite the course, or a notebook has unbalanced markers.
    """
    dest, root = dest.resolve(), root.resolve()
    if dest == root or root.is_relative_to(dest):
        raise ValueError(f"--out {dest} would replace the course folder itself: choose a folder such as "
                         f"{root / 'build' / 'student'}")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "notebooks").mkdir(parents=True)
    for name in COPIED:
        src, target = root / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, ignore=IGNORED)
        else:
            shutil.copy2(src, target)
    report: dict[str, Changes] = {}
    known = course_paths(root)
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb, changes = learner_notebook(nbformat.read(path, as_version=4))
        nbformat.write(nb, dest / "notebooks" / path.name)
        # The one rule for citations: a course file a learner notebook cites is in the edition.
        for cell, cited in cited_paths(nb, known):
            if (dest / cited).exists():
                continue
            if cited.endswith("/") or withheld(cited):
                changes.dangling.append((cell, cited))
                continue
            (dest / cited).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / cited, dest / cited)
            changes.shipped.append(cited)
        report[path.name] = changes
    add_assessment(dest, root)
    (dest / "Makefile").write_text(learner_makefile(root))
    (dest / "README.md").write_text(LEARNER_README)
    return report


def add_assessment(dest: Path, root: Path = ROOT) -> None:
    """The graded assessment in the learner edition (issue 55): the learner's copy (``assessment/ddp/``: no
    solutions, no hidden tests, as nbgrader releases it), the test copy ``make assess`` grades with
    (``assessment/tests/ddp/``: the hidden tests, no solutions; the course is public), the grader's pilot numbers
    and the written answer's rubric without its instructors-only part."""
    from course_lib.assessment.release import release, graded_copy

    path = root / "assessment" / "source" / "ddp" / "assessment.ipynb"
    if not path.is_file():  # a course without the assessment (a scratch copy in the tests)
        return
    source = nbformat.read(path, as_version=4)
    for folder, nb in (("ddp", release(source)), ("tests/ddp", graded_copy(source))):
        (dest / "assessment" / folder).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest / "assessment" / folder / "assessment.ipynb")
    shutil.copy2(root / "assessment" / "pilot.json", dest / "assessment" / "pilot.json")
    rubric = (root / "instructor" / "assessment" / "rubric.md").read_text().split("\n## Instructors only", 1)[0]
    (dest / "assessment" / "rubric.md").write_text(rubric.rstrip() + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "student",
                        help="output folder (default: build/student)")
    args = parser.parse_args(argv)
    try:
        report = build(args.out)
    except ValueError as exc:
        print(f"student: ERROR: {exc}", file=sys.stderr)
        return 2
    for name, changes in report.items():
        shipped = f"; cited, so shipped: {', '.join(changes.shipped)}" if changes.shipped else ""
        print(f"{name}: {len(changes.removed)} cells removed, {len(changes.stubbed)} stubbed, "
              f"{len(changes.cleared)} outputs cleared{shipped}")
        for cell, cited in changes.dangling:
            print(f"student: WARNING: {name} cell {cell} (learner copy) cites {cited}, which the learner edition "
                  f"does not ship ({', '.join(f + '/' for f in WITHHELD)} stay out): reword the cell or ship the "
                  "file", file=sys.stderr)
    print(f"learner edition written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
