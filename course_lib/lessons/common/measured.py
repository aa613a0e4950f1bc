"""How a notebook shows a measured value: in a form nbval masks, next to a verdict nbval compares.

A throughput or an efficiency changes from run to run; what the learner is taught must not. The
course therefore prints a measured number with its unit or with the measured sign ``≈``
(tests/notebooks/sanitize.cfg masks both), and next to it a deterministic verdict: the measured interval
against a threshold, which can come out ``True``, ``False`` or ``cannot tell`` (the interval
contains the threshold). The decision itself is :func:`course_lib.training.stats.ci_verdict`; the words a
notebook shows for it (``True`` / ``False`` / ``cannot tell``, or a lesson's own pair such as ``faster`` /
``slower``, and the sentence a verdict picks) are chosen in one place, :func:`in_words`.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from course_lib.training.stats import CANNOT_TELL, ci_verdict

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = ["MEASURED_SIGN", "MEASURED_HERE", "approx", "measured_view", "in_words", "at_least"]

#: The sign in front of a measured number without a unit; tests/notebooks/sanitize.cfg masks what follows it.
MEASURED_SIGN = "≈"
#: The start of a Markdown sentence whose words a timing verdict chose (a reading, a summary's bullet): the
#: verdict varies with the machine's noise, so tests/notebooks/sanitize.cfg masks the rest of that line.
MEASURED_HERE = "*Measured here:*"


def approx(value: float, digits: int = 2) -> str:
    """``value`` as a measured number, e.g. ``approx(0.5234) == "≈0.52"``.

    Args:
        value: The measured number.
        digits: Decimals shown.
    """
    return f"{MEASURED_SIGN}{value:.{digits}f}"


def measured_view(table: "pandas.DataFrame", columns: Iterable[str], digits: int = 2,
                  width: int | None = None) -> "pandas.DataFrame":
    """A copy of ``table`` for display, with the measured ``columns`` written as ``≈`` numbers.

    Args:
        table: Any table (its other columns are shown as they are: they are compared).
        columns: Columns that hold measured values (throughputs, efficiencies, their intervals).
        digits: Decimals shown in those columns.
        width: Pad every measured cell to this many characters, so that a wide table wraps into the
            same blocks whatever the measured values (pandas wraps at 80 characters).

    Returns:
        A new DataFrame; ``table`` is unchanged.

    Raises:
        KeyError: A column that ``table`` does not have.
    """
    view = table.copy()
    for column in columns:
        if column not in view.columns:
            raise KeyError(f"no column {column!r} in the table; it has {list(view.columns)}")
        view[column] = [approx(float(v), digits).rjust(width or 0) for v in view[column]]
    return view


def in_words(verdict: bool | str | None, yes: str, no: str, unsure: str = CANNOT_TELL) -> str:
    """What a notebook says for a verdict: ``yes`` when it is True, ``no`` when False, ``unsure`` when it
    cannot tell.

    Args:
        verdict: The decision (:func:`course_lib.training.stats.interval_verdict`: True, False, ``None``) or its
            printed form (:func:`at_least`: ``"True"``, ``"False"``, ``"cannot tell"``).
        yes: The words (or sentence) for True, e.g. ``"faster"``.
        no: The words for False.
        unsure: The words for "cannot tell"; by default ``"cannot tell"`` itself.

    Raises:
        ValueError: A string that is not a printed verdict.

    Introduced in notebooks/01_data_parallelism.ipynb.
    """
    if isinstance(verdict, str):
        printed = {"True": True, "False": False, CANNOT_TELL: None}
        if verdict not in printed:
            raise ValueError(f"a verdict is True, False or {CANNOT_TELL!r}, got {verdict!r}")
        verdict = printed[verdict]
    return unsure if verdict is None else (yes if verdict else no)


def at_least(value: float, half_width: float, threshold: float) -> str:
    """Verdict "the measured value is at least ``threshold``", decided with its 95 % interval.

    Args:
        value: The measured value (a mean or a median).
        half_width: Half the width of its 95 % interval (0 for an exact value).
        threshold: The level that the verdict asks about.

    Returns:
        ``"True"`` when the whole interval ``value ± half_width`` lies at or above the threshold,
        ``"False"`` when it lies below, ``"cannot tell"`` when it contains the threshold.

    Raises:
        ValueError: A negative ``half_width``.
    """
    return in_words(ci_verdict(value, half_width, threshold, inclusive=True), "True", "False")
