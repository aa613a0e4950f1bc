"""Small statistics shared by the course's measurements: Student's t and a mean's 95 % interval.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import math

__all__ = ["t_critical_95", "mean_ci95"]

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
