"""Section 10s of ``make bench``: what the gradient's all-reduce adds to a training step (notebook 05, section 5).

Notebook 05 cannot resolve it: its budget holds 4 steps per epoch per rank and a few launches, against an
effect of about 10 ms on a step of about 100 ms (the 4.8 MB gradient's all-reduce at the fitted α and β), and its
paired epochs read +12.6 ± 2.9, +12.0 ± 8.6 and -6.1 ± 6.5 ms in three recordings: the epochs of one launch drift
together, so they are not independent samples. Here the **round** is the unit: each round launches
``source_code/horovod_fmnist.py`` on 2 workers with ``hvd.DistributedOptimizer`` and without it
(``--no-distributed-optimizer``, a control run whose gradients are not all-reduced), the order reversed every other
round (A B, B A: a drift of the machine moves both alike), and takes each launch's mean time per step over its
timed epochs (the first epoch, with tracing and the first broadcast, left out). The difference per round, with
its Student-t 95 % interval over the rounds, decides "slower" / "faster" / "cannot tell" against 0.

The round count is declared before the run (:data:`ROUNDS`) and sized by :func:`rounds_for`: to resolve 10 ms the
interval's half-width must stay below about 5 ms; with a round-to-round standard deviation of the difference of
10 ms (the spread of the recordings above, taken at its upper end), that takes 18 rounds. A pilot that measures
the spread lower may shrink it (``rounds_for(pilot_sd_ms, 5.0)``).

How ``benchmarks/run.py`` calls it (one section, like section 10)::

    from benchmarks import step_cost
    step_samples = step_cost.run_section(rounds=step_cost.ROUNDS, timeout_s=900, printer=_printer,
                                         env=COURSE_HOROVOD_ENV)
    rows += step_cost.rows(step_samples)

Plain Python except the launches (``run_section``); the rows are tested on synthetic rounds
(tests/test_benchmarks_step_cost.py).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Mapping, Sequence

from benchmarks.stats import Row
from course_lib.lessons.common.measured import in_words
from course_lib.training.stats import ci_verdict, mean_ci95, t_critical_95

__all__ = ["SECTION", "ROUNDS", "TRAIN_ARGS", "VARIANTS", "rounds_for", "run_section", "rows"]

SECTION = "10s"
REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "source_code" / "horovod_fmnist.py"
#: Declared round count (see the module docstring: a 5 ms half-width at a 10 ms round-to-round spread).
ROUNDS = 18
#: 2 048 images at batch 64 on 2 workers: 16 steps per epoch per rank; 3 epochs, the first left out.
TRAIN_ARGS = ["--json", "--train-subset", "2048", "--test-subset", "128", "--batch-size", "64", "--epochs", "3",
              "--threads-per-worker", "1"]
#: The two launches of a round: the course's job, and the control run without the gradient's all-reduce.
VARIANTS = {"with": [], "without": ["--no-distributed-optimizer"]}


def rounds_for(spread_ms: float, half_width_ms: float, *, most: int = 200) -> int:
    """The fewest rounds whose 95 % interval of a mean has half-width at most ``half_width_ms`` at a
    round-to-round standard deviation of ``spread_ms`` (Student's t, so the count and the critical value agree).

    Raises:
        ValueError: A non-positive half-width, a negative spread, or more than ``most`` rounds needed.
    """
    if half_width_ms <= 0 or spread_ms < 0:
        raise ValueError(f"need half_width_ms > 0 and spread_ms >= 0, got {half_width_ms} and {spread_ms}")
    for n in range(2, most + 1):
        if t_critical_95(n - 1) * spread_ms / math.sqrt(n) <= half_width_ms:
            return n
    raise ValueError(f"more than {most} rounds needed for ±{half_width_ms} ms at a spread of {spread_ms} ms")


def _step_ms(epochs: Sequence[Mapping]) -> float:
    """Mean ms per step over a launch's timed epochs (warm-up epochs left out); NaN when none."""
    timed = [float(e["step_time_ms"]) for e in epochs if not e.get("warmup") and e.get("step_time_ms") is not None]
    return sum(timed) / len(timed) if timed else math.nan


def run_section(*, rounds: int, timeout_s: float, printer: Callable[[str], None],
                env: Mapping[str, str] | None = None) -> dict[str, list[float]]:
    """Launch every round; returns ``{"with": [ms per step per round], "without": [...]}``.

    A failed launch leaves NaN for its round (its error printed), so the rounds stay paired.
    """
    from course_lib.runner import launch

    found: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for r in range(rounds):
        order = list(VARIANTS) if r % 2 == 0 else list(VARIANTS)[::-1]
        for name in order:
            printer(f"[section {SECTION}, round {r + 1} of {rounds}] {name} the all-reduce")
            try:
                result = launch.run_horovod(TRAIN, TRAIN_ARGS + VARIANTS[name], workers=2,
                                            env={"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}, show="none",
                                            timeout=timeout_s, cwd=REPO)
                found[name].append(_step_ms(result.epochs))
            except launch.RunFailedError as exc:
                printer(f"!! {name} failed: {exc}")
                found[name].append(math.nan)
    return found


def rows(samples: Mapping[str, Sequence[float]]) -> list[Row]:
    """Section 10s's rows: each variant's ms per step, and the difference per round with its interval and verdict.

    The difference row's value is the mean of the per-round differences (with - without) and its spread the 95 %
    interval over the rounds (the unit: a round of two launches); its verdict is "slower", "faster" or
    "cannot tell" (the interval holds 0).
    """
    out: list[Row] = []
    pairs = [(w, o) for w, o in zip(samples.get("with", []), samples.get("without", []))
             if math.isfinite(w) and math.isfinite(o)]
    for name, column in (("with", 0), ("without", 1)):
        values = [p[column] for p in pairs]
        mean, half = mean_ci95(values)
        out.append(Row(SECTION, f"training step {name} the gradient's all-reduce (2 workers, Gloo)", mean,
                       (mean - half, mean + half) if math.isfinite(half) else None, "ms", len(values),
                       note="mean over rounds ± 95 % (unit: the round)", digits=1))
    mean, half = mean_ci95([w - o for w, o in pairs])
    verdict = in_words(ci_verdict(mean, half, 0.0) if pairs else None, "slower", "faster")
    out.append(Row(SECTION, "what the all-reduce adds to a step (with - without, paired by round)", mean,
                   (mean - half, mean + half) if math.isfinite(half) else None, "ms", len(pairs),
                   note=f"{verdict}; rounds declared before the run", digits=1))
    return out
