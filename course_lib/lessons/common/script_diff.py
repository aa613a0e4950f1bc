"""The lines a learner changes to go from one script to another, generated from the files so they cannot drift.

Notebook 03 shows ``keras_fmnist.py`` → ``horovod_fmnist_minimal.py``; notebook 06 shows ``keras_fmnist.py`` →
``mwms_fmnist.py`` and ``horovod_fmnist_minimal.py`` → ``horovod_fmnist_elastic.py``. :func:`changed_lines` is
the diff itself: the lines after the module docstring (the docstrings are meant to differ), compared line by
line, with ``-`` for a removed line and ``+`` for an added one. Two options keep a diff about what a learner
must change:

- ``fold_reindented``: a block that only moved one level in (under a new ``with strategy.scope():`` or into a
  new function) is one ``~`` line that says how many lines moved, instead of every line twice (and blank
  lines added or removed are not shown);
- ``leave_out``: added lines that carry this marker (``"# Course"``: what the course's notebook reads from
  the script, which a learner's own script does without) are counted, not shown. :func:`show` prints the
  count and the marker, so nothing is hidden without saying so.

Introduced in notebooks/03_horovod.ipynb (the keras → horovod diff); the options in
notebooks/06_beyond_one_machine.ipynb.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ScriptDiff", "body", "changed_lines", "numbered_changes", "show"]


def body(lines: list[str]) -> list[str]:
    """The lines from the first ``import`` on: the module docstring left out."""
    return lines[next(i for i, line in enumerate(lines) if line.startswith("import ")):]


@dataclass(frozen=True)
class ScriptDiff:
    """The changed lines of one script against another.

    Attributes:
        hunks: The changes, one list per place where the scripts differ (unchanged lines between two places):
            ``-``/``+`` lines, and ``~`` lines for folded re-indented blocks, in file order.
        left_out: The added lines that carried the ``leave_out`` marker (not in ``hunks``).
        marker: That marker (``None``: nothing was left out).
    """

    hunks: list[list[str]]
    left_out: list[str]
    marker: str | None

    @property
    def lines(self) -> list[str]:
        """Every shown line, in file order."""
        return [line for hunk in self.hunks for line in hunk]


def _read(path: str | os.PathLike[str]) -> list[str]:
    return body(Path(path).read_text(encoding="utf-8").splitlines())


def _folded(old: list[str], new: list[str]) -> list[list[str]]:
    """Hunks of a line diff in which unchanged lines whose indentation changed become one ``~`` line per block."""
    hunks: list[list[str]] = [[]]
    matcher = difflib.SequenceMatcher(None, [s.strip() for s in old], [s.strip() for s in new], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":  # blank lines added or removed say nothing: left out
            hunks[-1] += [f"-{line}" for line in old[i1:i2] if line.strip()]
            hunks[-1] += [f"+{line}" for line in new[j1:j2] if line.strip()]
            continue
        run: list[str] = []
        for before, after in zip(old[i1:i2], new[j1:j2]):
            if before != after and before.strip():
                run.append(after)
                continue
            if run:
                hunks[-1].append(_fold_line(run))
                run = []
            if before.strip() and hunks[-1]:  # an unchanged line: the next change is another place
                hunks.append([])
        if run:
            hunks[-1].append(_fold_line(run))
    return [hunk for hunk in hunks if hunk]


def _fold_line(run: list[str]) -> str:
    indent = run[0][: len(run[0]) - len(run[0].lstrip())]
    what = "line" if len(run) == 1 else "lines"
    return f"~{indent}{run[0].strip()}  … {len(run)} {what} re-indented, otherwise unchanged"


def changed_lines(old: str | os.PathLike[str], new: str | os.PathLike[str], *, fold_reindented: bool = False,
                  leave_out: str | None = None) -> ScriptDiff:
    """The diff of script ``old`` → script ``new`` (after their docstrings).

    Args:
        old, new: The two scripts.
        fold_reindented: Show a block that only changed its indentation as one ``~`` line.
        leave_out: A marker (e.g. ``"# Course"``); added lines containing it are counted in
            ``left_out`` instead of shown.

    Returns:
        The :class:`ScriptDiff`.
    """
    a, b = _read(old), _read(new)
    if fold_reindented:
        hunks = _folded(a, b)
    else:
        hunks = []
        for line in difflib.unified_diff(a, b, lineterm="", n=0):
            if line.startswith("@@"):
                hunks.append([])
            elif line[:1] in "+-" and not line.startswith(("+++", "---")):
                hunks[-1].append(line)
    left = [line for hunk in hunks for line in hunk if leave_out and line.startswith("+") and leave_out in line]
    kept = [[line for line in hunk if line not in left] for hunk in hunks]
    return ScriptDiff([hunk for hunk in kept if hunk], [line[1:] for line in left], leave_out)


def numbered_changes(diff: ScriptDiff, tag: str) -> list[str]:
    """The numbered changes ``tag (k/n)`` that the shown lines name, sorted: ``['1/4', '2/4', ...]``."""
    pattern = re.compile(re.escape(tag) + r" \((\d+/\d+)\)")
    return sorted({m.group(1) for line in diff.lines for m in pattern.finditer(line)})


def show(old: str | os.PathLike[str], new: str | os.PathLike[str], *, tag: str, leave_out: str | None = None,
         fold_reindented: bool = True) -> ScriptDiff:
    """Print the diff of ``old`` → ``new``, the numbered changes named ``tag``, and what was left out.

    Returns:
        The :class:`ScriptDiff` that was printed.
    """
    diff = changed_lines(old, new, fold_reindented=fold_reindented, leave_out=leave_out)
    print("\n".join(diff.lines))
    print(f"numbered changes ({tag}):", numbered_changes(diff, tag))
    if diff.left_out:
        print(f"not shown: {len(diff.left_out)} added lines marked {diff.marker!r}, which feed this notebook's "
              f"checks; a script of yours leaves them out (see them with: grep -n '{diff.marker}' "
              f"source_code/{Path(new).name})")
    return diff
