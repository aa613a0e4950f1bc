"""Self-checks of notebook 05's exercises: what an all-reduce costs (the alpha-beta model).

* :func:`check_prediction` (``05.predict``): the learner's predicted time of one all-reduce against the model
  fitted in the notebook (on 8 workers: each hop charged the measured hop, the rest of alpha once per call;
  where measured, the model against the measurement);
* :func:`check_alpha_beta_fit` (``05.fit``, a coding exercise): runs the learner's ``my_fit(sizes, seconds,
  workers)`` on timings drawn from known alpha and beta, which the check makes up here (nothing is stored), and
  names the typical slip (the ring factor, a unit) without giving the formula.

Each prints and returns its verdict the one way :mod:`course_lib.lessons.common.checks` defines.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from course_lib.lessons.common.checks import learner_call, right, waiting, wrong
from course_lib.lessons.common.ring import ring_factor
from course_lib.lessons.communication.allreduce_model import AlphaBeta

__all__ = ["check_prediction", "check_alpha_beta_fit", "FIT_CASES"]


def check_prediction(answer_s: float | None, *, fit: AlphaBeta, size_bytes: float, workers: int,
                     measured_s: float | None = None, measured_iqr_s: tuple[float, float] | None = None,
                     rel_tol: float = 0.05) -> bool:
    """Self-check ``05.predict``: does the learner's predicted all-reduce time match the fitted model?

    When a measured time is given and the answer is right, a ``measured:`` line also says how far the model
    is from the measurement (a machine's value: the notebooks' sanitize rules mask that line).

    Args:
        answer_s: The learner's prediction in seconds; ``None``: not answered yet.
        fit: The model fitted in the notebook.
        size_bytes: Gradient size in bytes (parameters x 4 for float32).
        workers: Worker count of the question.
        measured_s: Median measured time of that all-reduce, if it was run.
        measured_iqr_s: ``(q1, q3)`` of that measurement.
        rel_tol: Accepted relative difference between the answer and the model.

    Returns:
        True when the answer is within ``rel_tol`` of the model's prediction.
    """
    key = "05.predict"
    expected = fit.predict(size_bytes, workers)
    if answer_s is None:
        return waiting(key)
    try:
        value = float(answer_s)
    except (TypeError, ValueError):
        return wrong(key, f"{answer_s!r} is not a number of seconds.", "set `answer` to a number, in seconds")
    if not (math.isfinite(value) and abs(value - expected) <= rel_tol * expected):
        return wrong(key, f"{value:.6g} s is not what the fitted model predicts.",
                     "which parts of alpha are paid once per call and which once per hop of the ring, and how "
                     "many bytes does each link carry? Keep S in bytes, beta in bytes per second, times in seconds")
    right(key, "your prediction matches the fitted model")
    if measured_s is not None:
        off = (expected - measured_s) / measured_s
        inside = measured_iqr_s is not None and measured_iqr_s[0] <= expected <= measured_iqr_s[1]
        print(f"measured: model {expected * 1e3:.2f} ms vs measured {measured_s * 1e3:.2f} ms "
              f"({off:+.0%}); model inside the measured IQR: {inside}")
    return True


#: ``05.fit``: (alpha in seconds, beta in bytes/s, workers) of the made-up timings the learner's fit must recover.
FIT_CASES: list[tuple[float, float, int]] = [(2e-4, 1.5e9, 4), (5e-3, 4e8, 8), (3e-5, 2e10, 3)]
_SIZES = np.array([4 * 4 ** k * 1024 for k in range(8)], dtype=float)        # 4 KiB .. 64 MiB, as the benchmark


def _diagnose_fit(alpha: float, beta: float, workers: int, got_alpha: float, got_beta: float) -> str:
    """A hint that names the slip (never the formula), from how far the learner's values are off."""
    def near(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=0.02)

    if near(got_beta, beta / ring_factor(workers)) or near(got_beta, beta * ring_factor(workers)):
        return f"with {workers} workers, how many bytes does each link carry for a message of S bytes"
    if near(got_beta * beta, 1.0) or near(got_beta, 1.0 / beta * ring_factor(workers)):
        return "beta is a rate, bytes per second: the fit's slope is seconds per byte"
    if near(got_beta, beta / 1e9) or near(got_alpha, alpha * 1e3) or near(got_alpha, alpha * 1e6):
        return "return alpha in seconds and beta in bytes per second, the units of the timings"
    if near(got_alpha, beta) or near(got_beta, alpha):
        return "return the pair in the order (alpha_s, beta_bytes_per_s)"
    return "plot seconds against bytes: which part of the line is alpha, which part tells beta"


def check_alpha_beta_fit(my_fit: Callable[..., Any]) -> bool:
    """Self-check ``05.fit``: does the learner's ``my_fit(sizes_bytes, seconds, workers)`` recover alpha and beta?

    The check makes up noise-free timings ``T(S) = alpha + 2 (N - 1) / N x S / beta`` for each case of
    :data:`FIT_CASES` (N = 3, 4 and 8, so that the ring factor matters), at the benchmark's message sizes, and
    wants ``(alpha_s, beta_bytes_per_s)`` back within 1 %.

    Args:
        my_fit: The learner's function; it returns ``(alpha_s, beta_bytes_per_s)``.

    Returns:
        True when every case is recovered.
    """
    key = "05.fit"
    for alpha, beta, workers in FIT_CASES:
        seconds = alpha + ring_factor(workers) * _SIZES / beta
        ran, got = learner_call(key, my_fit, _SIZES.copy(), seconds.copy(), workers, what="fit",
                                placeholder="not written yet — write my_fit in the cell above and run both cells.")
        if not ran:
            return False
        try:
            got_alpha, got_beta = (float(v) for v in got)
        except (TypeError, ValueError):
            return wrong(key, f"your function returned {got!r}.", "return two numbers: (alpha_s, beta_bytes_per_s)")
        if not (math.isclose(got_alpha, alpha, rel_tol=0.01, abs_tol=1e-9) and math.isclose(got_beta, beta,
                                                                                          rel_tol=0.01)):
            return wrong(key, f"on timings of {workers} workers your fit gives alpha = {got_alpha:.4g} s, beta = "
                         f"{got_beta:.4g} B/s, which do not reproduce them.",
                         _diagnose_fit(alpha, beta, workers, got_alpha, got_beta))
    return right(key, f"your fit recovers alpha and beta on {len(FIT_CASES)} made-up benchmarks (3, 4, 8 workers)")
