"""course_lib.training.stats: the one decision rule of every verdict, and efficiency with its interval.

Each verdict of the course (``measured.at_least``, ``ladder_verdicts.decide`` and ``ladder_table``,
``knobs.compare``, ``run_notes.superlinear_notes``, ``benchmarks/stats.goal_verdict``) calls
``interval_verdict``; the last test reads their source and fails when one of them decides by itself again.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from course_lib.training import stats

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("low, high, threshold, inclusive, expected", [
    (1.0, 2.0, 0.5, False, True),
    (1.0, 2.0, 2.5, False, False),
    (1.0, 2.0, 1.5, False, None),
    (1.0, 2.0, 1.0, False, None),    # an end at the threshold: "above" cannot tell ...
    (1.0, 2.0, 1.0, True, True),     # ... "at least" can
    (1.0, 2.0, 2.0, True, None),
    (math.nan, 2.0, 5.0, False, None),
])
def test_interval_verdict(low, high, threshold, inclusive, expected):
    assert stats.interval_verdict(low, high, threshold, inclusive=inclusive) is expected


def test_interval_verdict_rejects_a_reversed_interval():
    with pytest.raises(ValueError, match="low <= high"):
        stats.interval_verdict(2.0, 1.0, 0.0)


@pytest.mark.parametrize("value, half, threshold, expected", [
    (0.7, 0.1, 0.5, True), (0.3, 0.1, 0.5, False), (0.55, 0.1, 0.5, None), (0.7, math.nan, 0.5, None),
    (0.5, 0.0, 0.5, None),
])
def test_ci_verdict(value, half, threshold, expected):
    assert stats.ci_verdict(value, half, threshold) is expected


def test_ci_verdict_rejects_a_negative_half_width():
    with pytest.raises(ValueError, match="half_width"):
        stats.ci_verdict(1.0, -0.1, 0.5)


def test_scaling_efficiency_and_its_interval():
    eff, half = stats.scaling_efficiency(1500.0, 1000.0, 2, ci95_n=30.0, ci95_1=40.0)
    assert eff == pytest.approx(0.75)
    assert half == pytest.approx(0.75 * math.sqrt(0.02 ** 2 + 0.04 ** 2))
    assert stats.scaling_efficiency(1000.0, 1000.0, 1, ci95_n=0.0, ci95_1=0.0) == (1.0, 0.0)
    assert math.isnan(stats.scaling_efficiency(1500.0, 1000.0, 2)[1])  # no interval given: none known
    assert all(math.isnan(x) for x in stats.scaling_efficiency(1.0, 0.0, 2))
    with pytest.raises(ValueError, match="n must be"):
        stats.scaling_efficiency(1.0, 1.0, 0)


#: (file, function) of every verdict; each must call the owner and compare no interval end itself.
VERDICTS = [("course_lib/lessons/common/measured.py", "at_least"),
            ("course_lib/lessons/large_batch/ladder_verdicts.py", "decide"),
            ("course_lib/lessons/large_batch/ladder_verdicts.py", "ladder_table"),
            ("course_lib/lessons/communication/knobs.py", "compare"),
            ("course_lib/lessons/horovod/run_notes.py", "superlinear_notes"), ("benchmarks/stats.py", "goal_verdict"),
            ("course_lib/lessons/large_batch/recovery.py", "recovery_word")]
OWNERS = {"interval_verdict", "ci_verdict"}


def _function(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name)


def owner_problems(root: Path) -> list[str]:
    """Every verdict function that does not call the owner, or compares a value with ``<``/``>`` itself."""
    problems = []
    for file, name in VERDICTS:
        func = _function(root / file, name)
        calls = {node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                 for node in ast.walk(func) if isinstance(node, ast.Call)}
        if not calls & OWNERS:
            problems.append(f"{file}:{name} does not call {sorted(OWNERS)}")
        orders = [node.lineno for node in ast.walk(func) if isinstance(node, ast.Compare)
                  and any(isinstance(op, (ast.Lt, ast.Gt, ast.LtE, ast.GtE)) for op in node.ops)]
        allowed = {"superlinear_notes": 2}  # `n < 2 or not eff > 1.0`: which rows to judge, not the verdict
        if len(orders) > allowed.get(name, 0):
            problems.append(f"{file}:{name} orders values itself at lines {orders}")
    return problems


def test_every_verdict_calls_the_one_rule():
    assert owner_problems(ROOT) == []


def test_a_verdict_deciding_by_itself_fails(tmp_path):
    for file, _ in VERDICTS:
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text((ROOT / file).read_text(encoding="utf-8"), encoding="utf-8")
    knobs = tmp_path / "course_lib/lessons/communication/knobs.py"
    text = knobs.read_text(encoding="utf-8")
    planted = text.replace("slower = interval_verdict(min(variant) - max(baseline), max(variant) - min(baseline), 0.0)",
                           "slower = True if min(variant) > max(baseline) else None")
    assert planted != text
    knobs.write_text(planted, encoding="utf-8")
    assert any("knobs.py:compare" in p for p in owner_problems(tmp_path))


def test_spread_upper_bound_follows_the_chi_square_table() -> None:
    """sqrt(df / chi2(0.10, df)) from the table: df 15 -> 8.547, df 7 -> 2.833, df 3 -> 0.584."""
    for samples, chi2_10, rel in ((16, 8.547, 1e-3), (8, 2.833, 1e-3), (4, 0.584, 7e-3)):
        df = samples - 1
        assert stats.spread_upper_bound(1.0, samples) == pytest.approx(math.sqrt(df / chi2_10), rel=rel)
    assert stats.spread_upper_bound(0.03, 16) > 0.03 and stats.spread_upper_bound(0.0, 5) == 0.0
    assert stats.spread_upper_bound(1.0, 100) < stats.spread_upper_bound(1.0, 10)   # more samples, tighter
    with pytest.raises(ValueError, match="samples >= 2"):
        stats.spread_upper_bound(1.0, 1)


def test_paired_ratio_interval_is_fiellers() -> None:
    """Against a hand computation: a = (2, 3, 4), b = (4, 5, 7), t(2) = 4.303."""
    ratio, low, high = stats.paired_ratio_ci95([2.0, 3.0, 4.0], [4.0, 5.0, 7.0])
    assert ratio == pytest.approx(9 / 16)
    # means 3, 16/3; variances of the means 1/3, (7/3)/3; covariance 1.5/3; the quadratic's roots:
    t2, va, vb, cab = 4.303 ** 2, 1 / 3, 7 / 9, 0.5
    q2, q1, q0 = (16 / 3) ** 2 - t2 * vb, -2 * (3 * 16 / 3 - t2 * cab), 9 - t2 * va
    assert q2 > 0
    root = math.sqrt(q1 * q1 - 4 * q2 * q0)
    assert (low, high) == pytest.approx(((-q1 - root) / (2 * q2), (-q1 + root) / (2 * q2)))


def test_paired_ratio_interval_is_unbounded_when_the_denominator_is_not_resolved() -> None:
    ratio, low, high = stats.paired_ratio_ci95([1.0, 1.1, 0.9, 1.0], [0.5, -0.4, 0.6, -0.5])
    assert (low, high) == (-math.inf, math.inf) and ratio == pytest.approx(4.0 / 0.2)
    assert stats.interval_verdict(low, high, 1.0) is None      # "cannot tell"
    assert math.isnan(stats.paired_ratio_ci95([1.0, 2.0], [1.0, -1.0])[0])
    with pytest.raises(ValueError, match="same length"):
        stats.paired_ratio_ci95([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="same length >= 2"):
        stats.paired_ratio_ci95([1.0], [1.0])


def test_paired_ratio_interval_covers_the_true_ratio_95_percent_of_the_time() -> None:
    """Simulated paired data (correlated, 8 pairs, true ratio 0.7): the interval holds 0.7 in about 95 % of draws."""
    import numpy as np

    rng = np.random.default_rng(4)
    covered = 0
    draws = 2000
    for _ in range(draws):
        b = rng.normal(6.0, 3.0, 8)
        a = 0.7 * b + rng.normal(0.0, 2.0, 8)
        _, low, high = stats.paired_ratio_ci95(list(a), list(b))
        covered += low <= 0.7 <= high
    assert 0.93 <= covered / draws <= 0.97
