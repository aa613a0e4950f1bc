"""The diffs the notebooks print (course_lib/lessons/common/script_diff.py), and the scripts they are printed from.

Notebook 06 prints ``keras_fmnist.py`` → ``mwms_fmnist.py`` and ``horovod_fmnist_minimal.py`` →
``horovod_fmnist_elastic.py`` with the lines marked ``# Course`` left out (counted). These tests hold the scripts to
what the notebook says of them: every shown added line is there for the strategy (``Strategy``) or for elasticity
(``Horovod``), the numbered changes are all there, and deleting the ``# Course`` lines leaves a script that runs
without course_lib (no name left undefined or unused: ruff's F401/F821/F841 on the stripped copy). Each check is
also run on a planted mistake, to see it fail.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.lessons.common import script_diff

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "source_code"
#: (old script, new script, the word every added line's reason names, the numbered changes' tag, their count)
PAIRS = {"mwms": ("keras_fmnist.py", "mwms_fmnist.py", "Strategy", "Strategy", 4),
         "elastic": ("horovod_fmnist_minimal.py", "horovod_fmnist_elastic.py", "Horovod", "Horovod Elastic", 4)}
COURSE = "# Course"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- the helper ----------------------------------------------------------------------------------------------
def test_default_is_notebook_03s_diff() -> None:
    """Without options it is the unified diff notebook 03 printed inline before (one owner, same lines)."""
    plain, minimal = SOURCE / "keras_fmnist.py", SOURCE / "horovod_fmnist_minimal.py"
    body = script_diff.body
    expected = [line for line in difflib.unified_diff(body(plain.read_text().splitlines()),
                                                      body(minimal.read_text().splitlines()), lineterm="", n=0)
                if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    diff = script_diff.changed_lines(plain, minimal)
    assert diff.lines == expected and diff.left_out == [] and diff.marker is None


OLD = '"""doc"""\nimport os\n\ndef main():\n    a = 1\n    b = 2\n    c = 3\n    print(a, b, c)\n'
NEW = ('"""another doc"""\nimport os\n\ndef main():\n    with scope():  # Strategy\n        a = 1\n        b = 2\n'
       '        c = 4\n    print(a, b, c)\n    report()  # Course: for the notebook\n')


def test_fold_reindented_and_leave_out(tmp_path: Path) -> None:
    old, new = _write(tmp_path, "old.py", OLD), _write(tmp_path, "new.py", NEW)
    plain = script_diff.changed_lines(old, new)
    assert "-    a = 1" in plain.lines and "+        a = 1" in plain.lines  # the docstrings are not compared
    assert not any("doc" in line for line in plain.lines)
    folded = script_diff.changed_lines(old, new, fold_reindented=True, leave_out=COURSE)
    assert folded.hunks == [["+    with scope():  # Strategy",
                              "~        a = 1  … 2 lines re-indented, otherwise unchanged",
                              "-    c = 3", "+        c = 4"]]
    assert folded.left_out == ["    report()  # Course: for the notebook"] and folded.marker == COURSE


def test_show_says_what_it_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _write(tmp_path, "old.py", OLD), _write(tmp_path, "new.py", NEW.replace("# Strategy", "# S (1/1)"))
    script_diff.show(old, new, tag="S", leave_out=COURSE)
    out = capsys.readouterr().out
    assert "report()" not in out and "numbered changes (S): ['1/1']" in out
    assert "not shown: 1 added lines marked '# Course'" in out and "source_code/new.py" in out


# -- the scripts notebook 06 prints ---------------------------------------------------------------------------
def unexplained(diff: script_diff.ScriptDiff, reason: str) -> list[str]:
    """Shown added lines that are not in a run of added lines headed by a line naming ``reason``.

    In each hunk, a run of ``+`` lines (a folded ``~`` block does not end it; a ``-`` line does) must start with a
    line that names its reason, in code or in a comment line above the code, as the scripts' blocks do.
    """
    bad = []
    for hunk in diff.hunks:
        in_run = False
        for line in hunk:
            if line.startswith("+"):
                in_run = in_run or reason in line
                if not in_run:
                    bad.append(line[1:])
            elif line.startswith("-"):
                in_run = False
    return bad


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_every_shown_line_says_why(pair: str) -> None:
    old, new, reason, tag, count = PAIRS[pair]
    diff = script_diff.changed_lines(SOURCE / old, SOURCE / new, fold_reindented=True, leave_out=COURSE)
    assert unexplained(diff, reason) == [], f"{new}: lines added without a '{reason}' reason"
    assert script_diff.numbered_changes(diff, tag) == [f"{k}/{count}" for k in range(1, count + 1)]
    assert not any("course_lib" in line or "drills." in line for line in diff.lines)


def test_an_unexplained_line_is_caught(tmp_path: Path) -> None:
    """The check above bites: one added line with no reason, in a copy of the MWMS script."""
    text = (SOURCE / "mwms_fmnist.py").read_text().replace("    callbacks = []", "    verbose = 1\n    callbacks = []")
    diff = script_diff.changed_lines(SOURCE / "keras_fmnist.py", _write(tmp_path, "mwms_fmnist.py", text),
                                     fold_reindented=True, leave_out=COURSE)
    assert unexplained(diff, "Strategy") == ["    verbose = 1"]


def without_course_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if COURSE not in line) + "\n"


def stripped_problems(path: Path) -> str:
    """What ruff says of the script with its ``# Course`` lines deleted ("" when it is clean), and course_lib left."""
    text = without_course_lines(path.read_text())
    left = [line for line in text.splitlines() if re.match(r"\s*(from|import)\s+course_lib", line)]
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select",
                           "F401,F821,F841", "--stdin-filename", path.name, "-"],
                          input=text, capture_output=True, text=True, timeout=60)
    return "\n".join(left) + ("" if done.returncode == 0 else done.stdout + done.stderr)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_the_script_runs_without_course_lib_once_its_course_lines_are_deleted(pair: str) -> None:
    new = SOURCE / PAIRS[pair][1]
    assert COURSE in new.read_text()
    assert stripped_problems(new) == ""
    compile(without_course_lines(new.read_text()), new.name, "exec")


def test_a_course_name_on_an_unmarked_line_is_caught(tmp_path: Path) -> None:
    text = (SOURCE / "horovod_fmnist_elastic.py").read_text()
    planted = re.sub(r"(state\.register_reset_callbacks\(\[on_reset\]\))",
                     r"\1\n    drills.announce(0, 1)", text, count=1)
    assert planted != text
    assert "drills" in stripped_problems(_write(tmp_path, "horovod_fmnist_elastic.py", planted))
