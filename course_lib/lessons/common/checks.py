"""The one pattern of every self-check cell: what it prints, what it returns, how it runs the learner's code.

Every self-check of every notebook (``answers.check`` for the numeric and word answers, the ``check_...``
functions of each notebook topic's ``checks`` module) prints exactly one verdict line,
``[key] ...``, through the three functions below, and returns it as a bool:

* ``[key] correct.`` or ``[key] correct: what was verified.`` -- returns True (:func:`right`);
* ``[key] not yet: what is wrong. Hint: a question or a rule to apply.`` -- returns False (:func:`wrong`);
  the hint points at the method (which quantity, which unit, which step), never at the value or the formula
  that the exercise asks for;
* ``[key] not answered yet -- set `answer` in the cell above and run both cells.`` (or ``not written yet``,
  ``not run yet``, ``not attempted yet`` for code) -- returns False (:func:`waiting`).

A notebook's self-check cell is one call, ``passed = check(...)`` or ``passed = check_xxx(...)``; no notebook
defines its own checker (``tests/test_exercises.py`` reads every notebook to prove it). The answer itself is
never stored: a check computes it from the learner's own run or from the course's functions, or compares a
salted digest (``answers.answer_digest``).

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["right", "wrong", "waiting", "word_answer", "learner_call", "VERDICT_LINE"]

#: The first line every self-check prints (tests/test_exercises.py matches every check's output against it).
VERDICT_LINE = re.compile(r"^\[\d\d\.[a-z0-9_]+\] (correct(\.|: .+)|not yet: .+ Hint: .+\.|"
                          r"not (answered|written|run|attempted) yet — .+)$", re.S)


def right(key: str, detail: str = "") -> bool:
    """Print ``[key] correct.`` (or ``[key] correct: detail.``) and return True."""
    print(f"[{key}] correct" + (f": {detail.rstrip('.')}." if detail else "."))
    return True


def wrong(key: str, problem: str, hint: str) -> bool:
    """Print ``[key] not yet: problem Hint: hint.`` and return False.

    Args:
        key: The exercise key.
        problem: What is wrong with this answer, as a sentence (it may quote the learner's value).
        hint: Where to look: a rule, a unit, a step; never the expected value or its formula.
    """
    problem = problem.rstrip()
    if not problem.endswith((".", "?", ":")):
        problem += "."
    print(f"[{key}] not yet: {problem} Hint: {hint.rstrip('.')}.")
    return False


def waiting(key: str, state: str = "not answered yet",
            todo: str = "set `answer` in the cell above and run both cells.") -> bool:
    """Print ``[key] <state> — <todo>`` (nothing to check yet) and return False."""
    print(f"[{key}] {state} — {todo}")
    return False


def word_answer(key: str, answer: Any, words: tuple[str, ...]) -> str | None:
    """The learner's one-word answer as one of ``words`` (lower case), or None after printing why not.

    Used by the change-the-experiment checks of notebooks 02-05 (``"rises"``, ``"wider"``, ``"agree"``...).
    """
    if answer is None:
        waiting(key)
        return None
    word = str(answer).strip().lower()
    if word not in words:
        wrong(key, f"{answer!r} is not one of {', '.join(words)}.", "answer with one of the words")
        return None
    return word


def learner_call(key: str, call: Callable[..., Any], *args: Any, placeholder: str, what: str,
                 **kwargs: Any) -> tuple[bool, Any]:
    """Run the learner's ``call(*args, **kwargs)``: ``(True, its value)``, or print why not: ``(False, None)``.

    The placeholder (``NotImplementedError``) prints ``[key] not written yet — placeholder`` (``placeholder``
    may start with its own state, e.g. ``"not attempted yet — ..."``); any other exception is the learner's
    code failing: it is named with the first line of its message, and the notebook does not crash.
    """
    try:
        return True, call(*args, **kwargs)
    except NotImplementedError:
        state, sep, todo = placeholder.partition(" — ")
        if sep:
            waiting(key, state, todo)
        else:
            waiting(key, "not written yet", placeholder)
    except Exception as exc:  # the learner's code failed: say how, do not crash the notebook
        first = (str(exc).splitlines() or [""])[0][:200]
        wrong(key, f"your {what} raised {type(exc).__name__}: {first}",
              "run it on a small case of your own first and read the error's last line")
    return False, None
