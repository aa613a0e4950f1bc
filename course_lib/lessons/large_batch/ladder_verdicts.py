"""Each rung of the ladder against the row it builds on: the paired difference over seeds and its verdict.

Every row of notebook 04's ladder runs with the same seeds (same initial weights, data order, dropout masks),
so two rows compare *paired*: the verdicts use the 95 % CI of the per-seed differences
(:func:`course_lib.training.stats.mean_ci95`), decided by :func:`course_lib.training.stats.ci_verdict`, and
say "cannot tell" when it straddles the threshold. Nothing here imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from course_lib.lessons.common.measured import in_words
from course_lib.lessons.large_batch.ladder import Config
from course_lib.lessons.large_batch.trials import AccuracyKey, Trial
from course_lib.training.stats import ci_verdict, mean_ci95

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = ["paired_difference", "decide", "ladder_table", "explain"]


def paired_difference(a: Sequence[Trial], b: Sequence[Trial],
                      key: AccuracyKey = "test_accuracy") -> tuple[float, float]:
    """Mean of ``a``'s ``key`` minus ``b``'s over the seeds both ran, and its 95 % CI half-width.

    Raises:
        ValueError: Fewer than 2 common seeds (no interval).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    by_seed = {t.seed: t.accuracy(key) for t in b}
    diffs = [t.accuracy(key) - by_seed[t.seed] for t in a if t.seed in by_seed]
    if len(diffs) < 2:
        raise ValueError("a paired comparison needs at least 2 seeds run by both rows")
    return mean_ci95(diffs)


def decide(mean: float, half: float, threshold: float = 0.0) -> str:
    """``"above"`` when the CI ``mean ± half`` lies above ``threshold``, ``"below"`` when below,
    ``"cannot tell"`` when it contains it (:func:`course_lib.training.stats.ci_verdict` in words).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    return in_words(ci_verdict(mean, half, threshold), "above", "below")


def ladder_table(configs: Sequence[Config], runs: Mapping[str, Sequence[Trial]]) -> "pandas.DataFrame":
    """Each row against its parent: paired test-accuracy difference, its CI and a verdict.

    Returns:
        A DataFrame indexed by name (the baseline has no row): ``parent``, ``delta``, ``ci95``,
        ``verdict`` (``"better"``, ``"worse"``, ``"cannot tell"``).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    import pandas as pd

    rows = []
    for config in configs:
        if config.parent is not None:
            mean, half = paired_difference(runs[config.name], runs[config.parent])
            rows.append({"config": config.name, "parent": config.parent, "delta": mean,
                         "ci95": half, "verdict": in_words(ci_verdict(mean, half, 0.0), "better", "worse")})
    return pd.DataFrame(rows).set_index("config")


def explain(verdict: str, mechanism: str) -> str:
    """The reason a summary gives for a rung: its mechanism when the rung measured ``"better"``, and only
    the proposal, marked as not shown, when it did not.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    if verdict == "better":
        return mechanism
    return f"proposed: {mechanism}; not shown here ({verdict})"
