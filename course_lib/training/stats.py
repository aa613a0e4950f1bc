"""Small statistics shared by the course's measurements: Student's t, a mean's 95 % interval, the
verdict of an interval against a threshold, and a scaling efficiency with its interval.

One decision rule serves every verdict of the course (notebooks, ablation ladder, knob tables,
benchmarks): :func:`interval_verdict` puts an interval ``[low, high]`` against a threshold and answers
``True`` (the whole interval lies above it), ``False`` (the whole interval lies below it) or ``None``,
"cannot tell" (the interval contains it). The interval is a measured value ± the half-width of its
95 % interval (:func:`ci_verdict`), the min–max spread of repeats (``benchmarks/stats.goal_verdict``),
or the range of the differences between two sets of samples (``lessons.communication.knobs.compare``: every sample
of one below every sample of the other). Callers choose only the words: ``True``/``False``,
``above``/``below``, ``better``/``worse``, ``faster``/``slower``, ``met``/``NOT met``.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import math

__all__ = ["t_critical_95", "spread_upper_bound", "mean_ci95", "paired_ratio_ci95", "CANNOT_TELL", "interval_verdict",
           "ci_verdict", "scaling_efficiency"]

#: The word of a verdict whose interval contains the threshold.
CANNOT_TELL = "cannot tell"

# Two-sided 95 % critical values of Student's t, df = 1..30.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_T95_LARGE = ((40, 2.021), (60, 2.000), (120, 1.980))


def t_critical_95(df: int) -> float:
    """Two-sided 95 % critical value of Student's t with ``df`` degrees of freedom.

    Args:
        df: Degrees of freedom, >= 1.

    Returns:
        The table value (df <= 30, 40, 60, 120; in between the next smaller df's, conservative);
        1.960 beyond 120.

    Raises:
        ValueError: ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= 30:
        return _T95[df - 1]
    value = _T95[-1]
    for limit, t in _T95_LARGE:
        if df >= limit:
            value = t
    return value if df <= 120 else 1.960


def spread_upper_bound(spread: float, samples: int) -> float:
    """One-sided 90 % upper confidence bound of a standard deviation measured on ``samples`` values.

    A pilot's spread from few samples can be far off; choosing a design's sample size for this bound
    (Browne 1995, "On the use of a pilot sample for sample size determination") rather than for the
    measured spread keeps the planned interval when the spread was measured low. The bound is
    ``spread × sqrt(df / chi²(0.10, df))``, df = ``samples - 1``, with the Wilson-Hilferty
    approximation of the chi-square quantile (within 0.1 % of the table from df = 5, 0.7 % at df = 3).

    Args:
        spread: The measured standard deviation, >= 0.
        samples: The values it was measured on, >= 2.

    Returns:
        The bound, >= ``spread``.

    Raises:
        ValueError: ``samples < 2`` or a negative ``spread``.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if samples < 2 or spread < 0:
        raise ValueError(f"need samples >= 2 and spread >= 0, got {samples} and {spread}")
    df = samples - 1
    z_10 = -1.2816   # the normal distribution's 10 % quantile
    chi2_10 = df * (1 - 2 / (9 * df) + z_10 * math.sqrt(2 / (9 * df))) ** 3
    return spread * math.sqrt(df / chi2_10)


def mean_ci95(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of its 95 % confidence interval (t-distribution).

    Args:
        values: Samples.

    Returns:
        ``(mean, half_width)``; half-width is NaN for fewer than 2 values, mean NaN for none.
    """
    k = len(values)
    if k == 0:
        return math.nan, math.nan
    mean = math.fsum(values) / k
    if k < 2:
        return mean, math.nan
    var = math.fsum((v - mean) ** 2 for v in values) / (k - 1)
    return mean, t_critical_95(k - 1) * math.sqrt(var / k)


def paired_ratio_ci95(numerators: list[float], denominators: list[float]) -> tuple[float, float, float]:
    """A ratio of two paired means, ``mean(a) / mean(b)``, and its 95 % interval by Fieller's theorem.

    The interval holds every ratio ``r`` for which the per-pair values ``a_i - r b_i`` have a mean whose
    t-interval (:func:`mean_ci95`) contains 0: exact when those values are normal, it keeps the pairing (the
    covariance of ``a`` and ``b``) and needs no large sample, unlike a bootstrap over a few pairs or the
    delta method. When the denominator's own interval reaches 0 the set is unbounded (the ratio cannot be
    told): both ends are then infinite.

    Args:
        numerators: ``a_i``, one per pair.
        denominators: ``b_i``, in the same order.

    Returns:
        ``(ratio, low, high)``; ``(ratio, -inf, inf)`` when the denominator is not resolved from 0
        (ratio NaN when its mean is 0).

    Raises:
        ValueError: Lists of different lengths, or fewer than 2 pairs.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    n = len(numerators)
    if n != len(denominators) or n < 2:
        raise ValueError(f"need two lists of the same length >= 2, got {n} and {len(denominators)}")
    mean_a, mean_b = math.fsum(numerators) / n, math.fsum(denominators) / n
    var_a = math.fsum((a - mean_a) ** 2 for a in numerators) / (n - 1) / n
    var_b = math.fsum((b - mean_b) ** 2 for b in denominators) / (n - 1) / n
    cov = math.fsum((a - mean_a) * (b - mean_b) for a, b in zip(numerators, denominators)) / (n - 1) / n
    ratio = mean_a / mean_b if mean_b else math.nan
    t2 = t_critical_95(n - 1) ** 2
    # (mean_a - r mean_b)^2 <= t^2 (var_a - 2 r cov + r^2 var_b): a quadratic q2 r^2 + q1 r + q0 <= 0
    q2, q1, q0 = mean_b ** 2 - t2 * var_b, -2 * (mean_a * mean_b - t2 * cov), mean_a ** 2 - t2 * var_a
    if q2 <= 0:
        return ratio, -math.inf, math.inf
    root = math.sqrt(max(q1 * q1 - 4 * q2 * q0, 0.0))
    return ratio, (-q1 - root) / (2 * q2), (-q1 + root) / (2 * q2)


def interval_verdict(low: float, high: float, threshold: float, *, inclusive: bool = False) -> bool | None:
    """Whether the interval ``[low, high]`` lies above ``threshold``: the course's one decision rule.

    Args:
        low: Lower end of the interval (a value minus its half-width, the smallest repeat, ...).
        high: Upper end.
        threshold: The level the verdict asks about.
        inclusive: A lower end exactly at the threshold counts as above ("at least"); by default it
            is "cannot tell" ("above").

    Returns:
        ``True`` when the whole interval lies above the threshold, ``False`` when it lies wholly
        below, ``None`` (cannot tell) when it contains the threshold or an end is NaN.

    Raises:
        ValueError: ``low > high``.
    """
    if math.isnan(low) or math.isnan(high):
        return None
    if low > high:
        raise ValueError(f"an interval needs low <= high, got [{low!r}, {high!r}]")
    if low > threshold or (inclusive and low == threshold):
        return True
    if high < threshold:
        return False
    return None


def ci_verdict(value: float, half_width: float, threshold: float, *, inclusive: bool = False) -> bool | None:
    """:func:`interval_verdict` of ``value ± half_width`` (a mean or a median and its 95 % half-width).

    Args:
        value: The measured value.
        half_width: Half the width of its 95 % interval (0 for an exact value; NaN: cannot tell).
        threshold: The level the verdict asks about.
        inclusive: As in :func:`interval_verdict`.

    Raises:
        ValueError: A negative ``half_width``.
    """
    if half_width < 0:
        raise ValueError(f"half_width must be >= 0, got {half_width!r}")
    if math.isnan(half_width) or math.isnan(value):
        return None
    return interval_verdict(value - half_width, value + half_width, threshold, inclusive=inclusive)


def scaling_efficiency(rate_n: float, rate_1: float, n: int, *, ci95_n: float = math.nan,
                       ci95_1: float = math.nan) -> tuple[float, float]:
    """Scaling efficiency ``E = T_N / (N × T_1)`` and the half-width of its 95 % interval.

    The half-width propagates the two throughputs' own intervals (relative errors added in
    quadrature, the runs taken as independent): ``E × sqrt((ci_N / T_N)² + (ci_1 / T_1)²)``. A run
    compared with itself (the baseline row of a table) has ``E = 1`` and no uncertainty: pass
    ``ci95_n=0, ci95_1=0``.

    Args:
        rate_n: Throughput with ``n`` devices (all devices together), images/s.
        rate_1: Throughput of one device (the baseline), images/s.
        n: Devices of the measured run, >= 1.
        ci95_n: Half-width of ``rate_n``'s 95 % interval (NaN: not known).
        ci95_1: Half-width of ``rate_1``'s 95 % interval (NaN: not known).

    Returns:
        ``(efficiency, half_width)``; the efficiency is NaN when a throughput is NaN or the baseline
        is 0, the half-width NaN when an interval is not known.

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not math.isfinite(rate_1) or rate_1 == 0 or not math.isfinite(rate_n):
        return math.nan, math.nan
    eff = rate_n / rate_1 / n
    if rate_n == 0:
        return eff, math.nan
    return eff, eff * ((ci95_n / rate_n) ** 2 + (ci95_1 / rate_1) ** 2) ** 0.5
