"""The learner edition (``make student`` = tools/student.py): solutions out, notebooks still pass nbval.

How the learner notebooks are proved to pass strict nbval without running the whole suite twice (about
10 minutes): the browser test (tests/browser/test_lab.py) serves a learner edition in JupyterLab, with the
learner tree's ``course_lib`` first on the path, and runs all of its 00_setup there (every cell runs, no
traceback, the doctor says ready: the tree stands on its own; issue 31: this was a strict nbval run of that
notebook here, 00's third run in the suite);
``test_learner_notebooks_equal_the_sources_but_for_solutions`` proves every learner notebook equals its
source notebook cell for cell (source, outputs, tags) except the cells the tool removed, stubbed or cleared, so
the course's nbval run covers every learner cell before the first solution; the cells from there on (the
"learner tail": the answers unset, the stubs raising) are run by the course's nbval itself, after each notebook's
last cell, in its kernel (``tests/notebooks/harness.py``, ``tools/maintainers/learner_tail.py``; tested below on a fixture
notebook, with a mutant that only the tail catches). The tool's tags are tried on a small fixture notebook,
which is executed, converted and validated with nbval too.
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest
from nested_pytest import copy_notebook_harness
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("student", ROOT / "tools" / "student.py")
student = importlib.util.module_from_spec(_spec)
sys.modules["student"] = student
_spec.loader.exec_module(student)
sys.path.insert(0, str(ROOT))
from tools.maintainers import learner_tail  # noqa: E402

SOLUTIONS = ROOT / "instructor" / "solutions"
TEXT_SUFFIXES = {".py", ".ipynb", ".md", ".txt", ".json", ".yml", ".yaml", ".toml", ".sh", ".cfg", ""}


def _code(source: str, tags: list[str] | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = tags
    return cell


def fixture_notebook() -> nbformat.NotebookNode:
    """A tiny exercise notebook using every marking of tools/student.py."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Fixture\n\nYou will add two numbers."),
        nbformat.v4.new_markdown_cell("Instructor note: the answer is 42.", metadata={"tags": ["instructor"]}),
        _code("answer = None  # your answer"),
        _code("answer = 6 * 7  # SECRET-SOLUTION-LINE", ["solution"]),
        _code('print("not answered yet" if answer is None else ("correct" if answer == 42 else "no"))',
              ["solution-output"]),
        _code("def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b  # SECRET-CODE-LINE\n    ### END SOLUTION\n"
              "\nprint(add(2, 3))"),
        _code('print("self-check kept")'),
    ]
    return nb


def test_tags_remove_clear_and_stub() -> None:
    source = fixture_notebook()
    learner, changes = student.learner_notebook(source)
    assert changes.removed == [1, 3] and changes.cleared == [4] and changes.stubbed == [5]
    text = nbformat.writes(learner)
    assert "SECRET" not in text and "the answer is 42" not in text
    stub = learner.cells[3]
    assert stub.source.splitlines()[1] == "    " + student.STUB
    assert "raises-exception" in stub.metadata["tags"] and stub.outputs == [] and stub.execution_count is None
    assert [c.source for c in learner.cells][-1] == 'print("self-check kept")'
    assert len(source.cells) == 7, "the source notebook must be left unchanged"


@pytest.mark.parametrize("body", ["### BEGIN SOLUTION\nx = 1\n", "x = 1\n### END SOLUTION\n",
                                  "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n"])
def test_unbalanced_markers_are_one_clear_error(body: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [_code("y = 0"), _code(body)]
    with pytest.raises(ValueError, match=r"cell 1: .*SOLUTION"):
        student.learner_notebook(nb)


def _nbval(notebook: Path, cwd: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    ini = cwd / "nbval-pytest.ini"  # an empty ini: the learner tree has no test configuration of its own
    ini.write_text("[pytest]\n")
    cmd = [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(cwd), "-p", "no:cacheprovider",
           "-q", "--nbval", "--nbval-current-env", f"--nbval-sanitize-with={ROOT / 'tests' / 'notebooks' / 'sanitize.cfg'}",
           str(notebook)]
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        ini.unlink()


@pytest.fixture(scope="module")
def executed_fixture() -> nbformat.NotebookNode:
    """:func:`fixture_notebook` executed once, with its solution (tests take a deep copy): one kernel for the two
    tests that need the course's run of it (issue 31)."""
    source = fixture_notebook()
    NotebookClient(source, timeout=60, kernel_name="python3", allow_errors=False).execute()
    return source


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_fixture_learner_edition_passes_strict_nbval(executed_fixture: nbformat.NotebookNode, tmp_path: Path) -> None:
    """Executed with its solution, converted, the learner notebook still passes nbval (stub raises, and the
    cleared self-check is run but not compared)."""
    source = copy.deepcopy(executed_fixture)
    assert source.cells[4].outputs[0]["text"] == "correct\n"
    learner, _ = student.learner_notebook(source)
    path = tmp_path / "fixture.ipynb"
    nbformat.write(learner, path)
    done = _nbval(path, tmp_path, dict(os.environ), timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout, done.stdout[-1000:]


@pytest.fixture(scope="module")
def edition(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("student") / "course"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "student.py"), "--out", str(dest)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dest


def test_out_may_not_replace_the_course(capsys: pytest.CaptureFixture[str]) -> None:
    """The command's main() in this process (a Python start and nbformat's import less, ~3.5 CPU-s; issue 31):
    the script's own entry point (``sys.exit(main())``) is run by the ``edition`` fixture."""
    assert student.main(["--out", str(ROOT)]) == 2
    assert "would replace the course folder" in capsys.readouterr().err
    assert (ROOT / "tests").is_dir()


def test_edition_holds_the_learner_files_only(edition: Path) -> None:
    dest = edition
    top = sorted(p.name for p in dest.iterdir())
    cited = {path.split("/")[0] for _, _, path in _citations(dest) if not student.withheld(path)}
    assert top == sorted({"Makefile", "README.md", "assessment", "cluster", "course_lib", "docs", "environment.yml", "notebooks",
                          "pyproject.toml", "requirements", "source_code", "tools"} | cited)
    every = [p.relative_to(dest).as_posix() for p in dest.rglob("*")]
    assert not [p for p in every if "instructor" in p or p.startswith("tests") or "__pycache__" in p]
    # The set-up and the local cluster only (learner.mk became the Makefile): no maintainers' tool (tools/README.md).
    assert sorted(p.name for p in (dest / "tools").iterdir()) == [
        "jupyterlab-overrides.json", "localcluster", "python_range.sh", "setup.sh", "setup_frameworks.sh",
        "uv_install.py", "wheel_cache.py"]
    assert sorted(p.name for p in (dest / "notebooks").iterdir()) == sorted(
        p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert (dest / "source_code" / "horovod_fmnist.py").is_file()
    assert (dest / "course_lib" / "__main__.py").is_file()



# --- a path a learner notebook cites is in the edition (issue 52: docs/run_times.json, benchmarks/README.md) --------
#: Citations of withheld paths that a notebook still shows, each with who removes it. The test fails when one is
#: gone (remove it here) and on any other.
OPEN_CITATIONS = {
    # 07 shows ddp_fmnist.py's diff, whose comment cites the test that fakes the GPU (issue 52; 07 and
    # source_code/ddp_fmnist.py were being edited by others when this rule came in).
    ("07_frameworks.ipynb", "tests/test_frameworks_scripts.py"),
}


def _citations(edition: Path, notebooks: list[Path] | None = None) -> list[tuple[str, int, str]]:
    """``(notebook, learner cell, path)`` for every course path the edition's notebooks (or ``notebooks``) cite."""
    known = student.course_paths(ROOT)
    return [(path.name, cell, cited) for path in notebooks or sorted((edition / "notebooks").glob("*.ipynb"))
            for cell, cited in student.cited_paths(nbformat.read(path, as_version=4), known)]


def _dangling(edition: Path, notebooks: list[Path] | None = None) -> set[tuple[str, str]]:
    """``(notebook, path)`` for every cited course path that the edition lacks."""
    return {(name, cited) for name, _, cited in _citations(edition, notebooks) if not (edition / cited).exists()}


def test_every_path_a_learner_notebook_cites_is_in_the_edition(edition: Path) -> None:
    """The one rule (tools/student.py): a course file a learner notebook shows by its path ships with the edition;
    a path the edition withholds (instructor/, tests/, tools/maintainers/) must not be cited at all."""
    cited = _citations(edition)
    assert ("04_large_batch.ipynb", 0, "docs/run_times.json") in cited   # every header's "All run times"
    dangling = _dangling(edition)
    assert dangling - OPEN_CITATIONS == set(), "cited in a learner notebook, missing from the edition"
    assert (edition / "docs" / "run_times.json").read_bytes() == (ROOT / "docs" / "run_times.json").read_bytes()
    assert OPEN_CITATIONS <= dangling, f"no longer cited: remove from OPEN_CITATIONS {OPEN_CITATIONS - dangling}"
    assert not [p for p in (edition / "tests", edition / "instructor", edition / "tools" / "maintainers") if p.exists()]


def test_the_citation_check_fails_on_a_path_the_edition_lacks(edition: Path, tmp_path: Path) -> None:
    """Planted: a learner notebook citing a withheld file, a course file the edition lacks and a withheld folder; an
    HTML comment's path (not shown) and a path under runs/ (not a course file) are not citations."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("See `instructor/notes/04_large_batch.md` and "
                                              "benchmarks/run.py.\n<!-- tools/maintainers/run_times.py -->"),
                _code("print('solutions: ../instructor/')"),
                _code("print('runs/04/log.txt')")]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="solutions: ../instructor/\n")]
    planted = tmp_path / "99_planted.ipynb"
    nbformat.write(nb, planted)
    assert _citations(edition, [planted]) == [("99_planted.ipynb", 0, "instructor/notes/04_large_batch.md"),
                                              ("99_planted.ipynb", 0, "benchmarks/run.py"),
                                              ("99_planted.ipynb", 1, "instructor/")]
    assert _dangling(edition, [planted]) == {("99_planted.ipynb", "instructor/notes/04_large_batch.md"),
                                             ("99_planted.ipynb", "benchmarks/run.py"),
                                             ("99_planted.ipynb", "instructor/")}


def test_the_builder_ships_a_cited_file_and_warns_of_a_withheld_one(tmp_path: Path) -> None:
    """build() on a copy of the course whose 01 cites benchmarks/run.py (a course file not in COPIED) and a
    file of instructor/: the first ships, the second does not and is reported dangling."""
    root = tmp_path / "course"
    for name in (*student.COPIED, student.LEARNER_MK, "instructor/notes"):
        source, target = ROOT / name, root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            (target.mkdir(parents=True, exist_ok=True) if name == "instructor/notes"
             else target.symlink_to(source, target_is_directory=True))
        else:
            target.symlink_to(source)
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "run.py").write_text("# the benchmarks\n")
    (root / "instructor" / "notes" / "04.md").write_text("the answer is 42\n")
    (root / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Run `benchmarks/run.py`; answers in `instructor/notes/04.md`.")]
    nbformat.write(nb, root / "notebooks" / "01_x.ipynb")
    report = student.build(tmp_path / "edition", root)
    assert report["01_x.ipynb"].shipped == ["benchmarks/run.py"]
    assert report["01_x.ipynb"].dangling == [(0, "instructor/notes/04.md")]
    assert (tmp_path / "edition" / "benchmarks" / "run.py").read_text() == "# the benchmarks\n"
    assert not (tmp_path / "edition" / "instructor").exists()

def _secret_strings() -> list[str]:
    """Distinctive strings of instructor/solutions, whitespace-normalised: each solution function's body as a
    whole (docstring left out) and its docstring, each comment of the working (3+ words with a number), and each
    stored answer written as the dict entry it is (``"00.steps": 235``).

    Single lines of 02's coding solution (``with tf.GradientTape() as tape:``) also appear in the lesson that
    the exercise asks learners to adapt (02's custom training loop): that is the lesson, not a leak, so lines
    alone are not searched for; the finished function is.
    """
    secrets: list[str] = []
    for path in SOLUTIONS.rglob("*.py"):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                body = node.body
                doc = ast.get_docstring(node)
                if doc:
                    secrets.append(doc)
                    body = body[1:]
                code = [line.split("  #")[0] for line in lines[body[0].lineno - 1:body[-1].end_lineno]]
                secrets.append("\n".join(code))
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values):
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                        secrets.append(f'"{key.value}": {value.value!r}')
        with path.open() as handle:
            secrets += [tok.string.lstrip("# ") for tok in tokenize.generate_tokens(handle.readline)
                        if tok.type == tokenize.COMMENT and len(tok.string.split()) >= 4
                        and any(ch.isdigit() for ch in tok.string)]
    assert len(secrets) >= 20, "instructor/solutions changed shape: update _secret_strings"
    return [" ".join(s.split()) for s in secrets]


def _readable(path: Path) -> str:
    """A file's text as a learner reads it (a notebook's cell sources and outputs), whitespace-normalised."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        parts = [c.source for c in nb.cells]
        parts += [str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                  for c in nb.cells for o in c.get("outputs", [])]
        text = "\n".join(parts)
    else:
        text = path.read_text(errors="replace")
    return " ".join(text.split())


def test_no_solution_string_in_the_edition(edition: Path) -> None:
    found = _occurrences(edition, _secret_strings())
    assert not found, "solution text in the learner edition:\n" + "\n".join(found)


def _occurrences(edition: Path, strings: list[str] | set[str]) -> list[str]:
    """``file: string`` for each of ``strings`` found in a text file of the learner edition."""
    found = []
    for path in edition.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            text = _readable(path)
            found += [f"{path.relative_to(edition)}: {s}" for s in strings if s in text]
    return found


def _comparable(cell: nbformat.NotebookNode) -> dict:
    """A cell as the learner edition must keep it: stderr left out (the learner has no conftest to check it)."""
    outputs = cell.get("outputs")
    return {"type": cell.cell_type, "source": cell.source, "tags": cell.get("metadata", {}).get("tags", []),
            "outputs": None if outputs is None else [o for o in outputs if o.get("name") != "stderr"],
            "count": cell.get("execution_count")}


def test_learner_notebooks_equal_the_sources_but_for_solutions(edition: Path) -> None:
    dest = edition
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        source = nbformat.read(path, as_version=4)
        learner = nbformat.read(dest / "notebooks" / path.name, as_version=4)
        _, changes = student.learner_notebook(source)
        changed = set(changes.cleared) | set(changes.stubbed)
        kept = [(i, c) for i, c in enumerate(source.cells) if i not in changes.removed]
        assert len(kept) == len(learner.cells), path.name
        for (index, src), out in zip(kept, learner.cells):
            if index not in changed:
                assert _comparable(src) == _comparable(out), f"{path.name} cell {index} differs"
        assert learner.metadata.get("kernelspec", {}).get("name") == "python3"
        assert not [o for c in learner.cells for o in c.get("outputs", []) if o.get("name") == "stderr"], path.name


# --- one text for the learner's commands (issue 33): tools/learner.mk ------------------------------
def test_learner_makefile_is_made_from_the_shared_part(edition: Path) -> None:
    shared = (ROOT / student.LEARNER_MK).read_text()
    assert (edition / "Makefile").read_text() == student.LEARNER_HEADER + shared
    course = (ROOT / "Makefile").read_text()
    assert f"include {student.LEARNER_MK}" in course.splitlines()
    for target in ("setup", "doctor", "lab"):   # defined once, in the shared part
        assert f"\n{target}:" in shared and f"\n{target}:" not in course, target


@pytest.mark.parametrize("makefile, profile", [("Makefile", "full"), ("tools/learner.mk", "learner")])
def test_setup_profile_of_each_makefile(makefile: str, profile: str) -> None:
    # Under `make test` this is a sub-make: without --no-print-directory and the parent's MAKE* variables it
    # would print "make[1]: Entering directory" (seen in the fresh-clone CI run).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")}
    done = subprocess.run(["make", "--no-print-directory", "-n", "-f", makefile, "setup", "doctor", "lab"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"COURSE_PROFILE={profile} bash tools/setup.sh", lines
    assert any(line.endswith("-m course_lib doctor") for line in lines)
    assert lines[-1].endswith("-m course_lib.environment.lab --port 8888")


# --- solutions tagged in the notebooks: the learner edition differs (issue 30, item 4) --------------
def _solution_cells(nb: nbformat.NotebookNode) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if "solution" in c.get("metadata", {}).get("tags", [])]


def test_student_output_has_no_solution_cell_and_differs_where_the_source_has_one(edition: Path) -> None:
    with_solutions = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        source = nbformat.read(path, as_version=4)
        learner = nbformat.read(edition / "notebooks" / path.name, as_version=4)
        assert not _solution_cells(learner), path.name
        if _solution_cells(source):
            with_solutions.append(path.name[:2])
            assert [c.source for c in learner.cells] != [c.source for c in source.cells], path.name
            assert len(learner.cells) == len(source.cells) - len(_solution_cells(source)), path.name
    assert {"05", "06"} <= set(with_solutions), with_solutions


def test_the_cell_after_a_solution_is_cleared_not_compared() -> None:
    """The self-check after a solution cell showed the solved state: the learner copy runs it unexecuted."""
    nb = nbformat.v4.new_notebook()
    solved = _code("print('[00.x] correct.')")
    solved.outputs = [nbformat.v4.new_output("stream", name="stdout", text="[00.x] correct.\n")]
    solved.execution_count = 3
    kept = _code("print(1)")
    kept.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.cells = [_code("answer = None"), _code("answer = 1", ["solution"]), solved, kept]
    learner, changes = student.learner_notebook(nb)
    assert changes.removed == [1] and changes.cleared == [2]
    assert learner.cells[1].outputs == [] and learner.cells[1].execution_count is None
    assert learner.cells[2].outputs and learner.cells[2].source == "print(1)"


# --- the learner tail: the learner's differing cells, run by the course's nbval (tools/maintainers/learner_tail.py) ------
def _tail_notebook(*sources: str, solution: int) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [_code(src, ["solution"] if i == solution else None) for i, src in enumerate(sources)]
    return nb


def test_the_tail_starts_at_the_placeholder_before_the_first_solution() -> None:
    nb = _tail_notebook("x = 1", "answer = None", "answer = 2", "print(answer)", "print(x)", solution=2)
    assert [number for number, _ in learner_tail.tail(nb)] == [1, 3, 4]
    assert learner_tail.premise_violations(nb, 2) == ["cell 3 reads ['answer']"]


def test_the_tail_starts_earlier_when_a_later_course_cell_rebinds_what_it_reads() -> None:
    """The kernel holds the course's LAST value of x (3); the learner's cell 4 must see 1: the tail starts at 0."""
    nb = _tail_notebook("x = 1", "answer = None", "answer = 2", "print(answer)", "print(x)", "x = 3", solution=2)
    assert learner_tail.premise_violations(nb, 1) == ["cell 4 reads ['x']"]
    assert [number for number, _ in learner_tail.tail(nb)] == [0, 1, 3, 4, 5]


def test_a_tail_that_cannot_stand_for_the_learner_is_one_clear_error() -> None:
    nb = _tail_notebook("answer = None", "answer = 2\nextra = 5", "print(answer, extra)", solution=1)
    with pytest.raises(ValueError, match=r"cell 2 reads \['extra'\].*its own value"):
        learner_tail.tail(nb)


def test_names_follow_the_order_of_execution() -> None:
    assert learner_tail.cell_names("for gpu in gpus:\n    print(gpu)") == ({"gpu"}, {"gpus", "print"})
    assert learner_tail.cell_names("x = f(x)")[1] == {"f", "x"}          # read before it is bound
    assert learner_tail.cell_names("ys = [y * k for y in xs]")[1] == {"k", "xs"}
    assert learner_tail.cell_names("def f(a):\n    return a + b\n")[1] == {"b"}
    assert learner_tail.cell_names("%matplotlib inline\nimport numpy as np") == ({"np"}, set())


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_course_nbval_runs_the_learner_tail_and_it_bites(executed_fixture: nbformat.NotebookNode,
                                                         tmp_path: Path) -> None:
    """nbval with the course's conftest runs the notebook, then its learner tail in the same kernel: the cleared
    self-check with the placeholder answer, the stub (raises, as tagged). A self-check that cannot take the
    placeholder passes the course's run and fails the learner's (the mutant notebook).

    The mutant keeps the executed notebook's outputs: its added assert holds in the course's run (the answer is
    set there), so it prints what the original printed; nbval re-runs every cell and compares (all 10 pass)."""
    source = copy.deepcopy(executed_fixture)
    broken = copy.deepcopy(executed_fixture)
    broken.cells[4].source = 'assert answer is not None, "the check cannot take the placeholder"\n' + \
        broken.cells[4].source
    folder = tmp_path / "notebooks"
    folder.mkdir()
    copy_notebook_harness(folder)
    (tmp_path / "tools").symlink_to(ROOT / "tools")      # the conftest finds tools/maintainers/learner_tail.py one level up
    nbformat.write(source, folder / "good.ipynb")
    nbformat.write(broken, folder / "broken.ipynb")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-c", str(tmp_path / "pytest.ini"), "--rootdir",
                           str(tmp_path), "-p", "no:cacheprovider", "-rA", "--nbval", "--nbval-current-env",
                           str(folder / "good.ipynb"), str(folder / "broken.ipynb")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
    out = done.stdout + done.stderr
    outcomes = {cell: status for status, cell in
                re.findall(r"^(PASSED|FAILED) (\S+::(?:Learner cell|Cell) \d+)", out, re.M)}
    learner = {cell: status for cell, status in outcomes.items() if "Learner" in cell}
    assert learner == {f"notebooks/{name}.ipynb::Learner cell {n}": "PASSED" if (name, n) != ("broken", 2) else "FAILED"
                       for name in ("good", "broken") for n in (0, 2, 3, 4)}, out
    assert [status for cell, status in outcomes.items() if "Learner" not in cell] == ["PASSED"] * 10, out
    assert "the check cannot take the placeholder" in out and done.returncode == 1, out


def test_no_notebook_solution_cell_text_in_the_edition(edition: Path) -> None:
    """The solution cells' code (each line of 20+ characters) is nowhere in the learner edition: not in a
    notebook and not in its course_lib (the checks compute what they compare with; they hold no worked answer)."""
    def code_lines(source: str) -> set[str]:
        return {" ".join(line.split("  #")[0].split()) for line in source.splitlines()}

    lines: set[str] = set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        solutions = _solution_cells(nb)
        given = set().union(*(code_lines(c.source) for i, c in enumerate(nb.cells) if i not in solutions))
        for index in solutions:   # less what the placeholders and the lesson show anyway
            lines |= code_lines(nb.cells[index].source) - given
    lines = {line for line in lines if len(line) >= 20}
    assert len(lines) >= 8, lines
    found = _occurrences(edition, lines)
    assert not found, "solution cell text in the learner edition:\n" + "\n".join(found)


def _solution_leaks(nb: nbformat.NotebookNode) -> tuple[list[str], int]:
    """Compared learner cells that read a name a solution cell set, and how many compared cells came after one."""
    _, changes = student.learner_notebook(nb)
    solved: set[str] = set()
    leaks, after = [], 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        bound, read = learner_tail.cell_names(cell.source)
        if index in changes.removed:
            solved |= bound
        elif index not in changes.cleared and index not in changes.stubbed and solved:
            after += 1
            if read & solved:
                leaks.append(f"cell {index} reads {sorted(read & solved)}")
    return leaks, after


def test_no_compared_learner_cell_reads_what_a_solution_set() -> None:
    """Why nbval of the course's notebooks covers the learner edition's compared cells (issue 30, item 4).

    A learner notebook is its source without the solution cells, with the cell after each one cleared (not
    compared). Every other cell is the same code (the equality test above), so it prints the same outputs unless
    it reads a name that a removed solution cell set: then the learner sees another value than the course
    run did. No compared cell may read such a name (clear it in tools/student.py's way, or give it its own
    value). The learner tail that the course's nbval runs (tools/maintainers/learner_tail.py) would show such a value too,
    where a cell prints it; this check also covers the cells that do not.
    """
    checked = 0
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        leaks, after = _solution_leaks(nbformat.read(path, as_version=4))
        assert not leaks, f"{path.name}: compared in the learner edition, but reading a solution's names: {leaks}"
        checked += after
    assert checked, "no compared cell after a solution was checked"


def test_the_solution_name_check_bites() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [_code("CYCLE_MS = None"), _code("CYCLE_MS = 25", ["solution"]), _code("print('checked')"),
                _code("print(CYCLE_MS * 2)"), _code("print('unrelated')")]
    assert _solution_leaks(nb) == (["cell 3 reads ['CYCLE_MS']"], 2)


def test_edition_holds_the_assessment_as_released_with_its_tests_and_rubric(edition: Path) -> None:
    """Issue 55: the learner's copy (no solutions, no hidden tests), the copy ``make assess`` grades with (the tests,
    no solutions), the grader's pilot numbers and the rubric without its instructors-only part; ``make assess``."""
    from course_lib.assessment.release import graded_copy, release

    source = nbformat.read(ROOT / "assessment" / "source" / "ddp" / "assessment.ipynb", as_version=4)
    assert sorted(p.relative_to(edition / "assessment").as_posix() for p in (edition / "assessment").rglob("*")
                  if p.is_file()) == ["ddp/assessment.ipynb", "pilot.json", "rubric.md", "tests/ddp/assessment.ipynb"]
    for name, made in (("ddp", release), ("tests/ddp", graded_copy)):
        shipped = nbformat.read(edition / "assessment" / name / "assessment.ipynb", as_version=4)
        assert [c.source for c in shipped.cells] == [c.source for c in made(source).cells]
    learner = "\n".join(c.source for c in nbformat.read(edition / "assessment/ddp/assessment.ipynb", 4).cells)
    assert "assert_part(graded" not in learner and "BEGIN HIDDEN TESTS" not in learner
    rubric = (edition / "assessment" / "rubric.md").read_text()
    assert "| criterion | points |" in rubric and "Instructors only" not in rubric and "full-marks answer" not in rubric
    assert not (edition / "assessment" / "source").exists()
    assert "\nassess: setup\n" in (edition / "Makefile").read_text()
    assert "make assess" in (edition / "README.md").read_text()


def test_no_line_of_the_assessments_reference_solution_in_the_edition(edition: Path) -> None:
    """Each line the reference solution adds to the starter (instructor/assessment/tape_fmnist_solution.py) is absent
    from every file of the learner edition, and so are the source notebook's concept answers."""
    solution = (ROOT / "instructor" / "assessment" / "tape_fmnist_solution.py").read_text().splitlines()
    def bare(line: str) -> str:
        return " ".join(line.split("#")[0].split())

    starter = {bare(line) for line in (ROOT / "assessment" / "starter_tape_fmnist.py").read_text().splitlines()}
    added = [bare(line) for line in solution if bare(line) not in starter]
    lessons = " ".join(_readable(p) for folder in ("source_code", "course_lib", "notebooks")
                       for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    added = [line for line in added if len(line) > 25 and line not in lessons]  # not what a lesson teaches anyway
    assert len(added) >= 3, "the solution changed shape: update this test"
    found = _occurrences(edition, added + ["ANSWER_STEPS = 118", "ANSWER_ALLREDUCE_BYTES = 7_200_000"])
    assert not found, found
