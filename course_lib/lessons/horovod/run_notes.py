"""What the control panel says about a run before its figure enters the scaling table: warm-up only, super-linear.

A run whose every epoch was warm-up measured nothing about scaling (:func:`warmup_only`); a table row above
100 % efficiency gets its likely cause, or "cannot tell" when its interval reaches 100 % (:func:`superlinear_notes`).
:class:`course_lib.lessons.horovod.widgets.ControlPanel` shows both.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import math
from typing import Any

from course_lib.training.stats import ci_verdict

__all__ = ["PANEL_WITHOUT_WIDGETS", "warmup_only", "superlinear_notes"]

#: What the panel's output shows where its widgets cannot run (a notebook read as a static page, the course site):
#: the controls it holds, and that it works only live.
PANEL_WITHOUT_WIDGETS = (
    "<p><b>Control panel</b> (it runs only live, in JupyterLab; here you see its description): sliders for the "
    "workers, the batch per worker and the epochs, a controller choice (Gloo or MPI), <b>Run</b> and <b>Stop</b>, "
    "the live log, and after each run the scaling table and its plot.</p>")


def warmup_only(result: Any) -> bool:
    """Whether a run measured nothing but warm-up (so its images/s must not enter a scaling table).

    The course's scripts mark each ``epoch`` event with ``warmup`` (tracing and caches filling,
    left out of the ``result``'s images/s); when every epoch was warm-up, the ``result`` falls
    back on them (``includes_warmup``). Epoch events without the key count as measured.

    Args:
        result: The launcher's ``RunResult``.

    Returns:
        ``True`` when the result says ``includes_warmup`` or every epoch event has ``warmup``.
    """
    if (getattr(result, "result", None) or {}).get("includes_warmup") is True:
        return True
    epochs = list(getattr(result, "epochs", None) or [])
    return bool(epochs) and all(e.get("warmup") is True for e in epochs)


def superlinear_notes(table: Any) -> list[str]:
    """One warning per row of a scaling table whose efficiency is above 100 %, with its cause.

    Args:
        table: A ``course_lib.lessons.common.scaling.scaling_table`` frame (``efficiency_ci95`` is used
            when present: a row whose interval reaches 100 % is "cannot tell").

    Returns:
        The warnings (empty when no row is super-linear).
    """
    notes = []
    for row in table.to_dict("records"):
        eff, n = float(row["efficiency"]), int(row["devices"])
        if n < 2 or not eff > 1.0:
            continue
        ci = float(row.get("efficiency_ci95", float("nan")))
        # Without an interval the value alone is judged (half-width 0).
        if ci_verdict(eff, 0.0 if math.isnan(ci) else ci, 1.0) is None:
            notes.append(f"{n} workers: efficiency {eff:.0%} is above 100 % but within its 95 % "
                         f"interval (±{ci:.0%}): cannot tell it from linear.")
            continue
        notes.append(
            f"{n} workers: super-linear efficiency {eff:.0%} (more than {n}x one worker). Likely "
            "cause: the 1-worker baseline ran slow — measured while the machine was busy (other "
            "runs, other learners), in its warm-up epoch, or with more threads than cores; "
            "smaller per-worker data fitting a cache can also help. Re-run the 1-worker "
            "baseline (several times, on a quiet machine) before trusting this figure.")
    return notes
