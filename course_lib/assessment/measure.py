"""The measure task: the learner's run records, saved; the grader's own recomputation of their efficiency.

The learner launches, in alternating rounds (:func:`course_lib.lessons.common.paired_runs.round_order`), a 2-worker
Horovod run of ``source_code/horovod_fmnist.py`` and its bound (:func:`course_lib.runner.multiworker.run_bound`),
saves the launches with :func:`save_rounds`, and reports the distribution efficiency (mean and 95 % half-width,
:func:`course_lib.lessons.common.paired_runs.launch_ratio`) and the verdict of "is it at least
:data:`EFFICIENCY_GOAL`?" (``"True"``, ``"False"`` or ``"cannot tell"``: :meth:`Paired.at_least`). The grader never
compares with a fixed number: :func:`grade_measure` reloads the records, checks that they are what the task asked
for (each round a Horovod run at 2 workers and a bound of 2 copies at the same per-worker batch and training
subset, at least :data:`MIN_ROUNDS` rounds, no launch twice), recomputes the ratio, and compares. "cannot tell" is
right exactly when the recomputed interval contains the goal.

Introduced in assessment/source/ddp/assessment.ipynb.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from course_lib.assessment import spec
from course_lib.assessment.code import Part
from course_lib.lessons.common.paired_runs import launch_ratio

__all__ = ["EFFICIENCY_GOAL", "MIN_ROUNDS", "MEAN_TOLERANCE", "save_rounds", "load_rounds", "recompute",
           "grade_measure"]

EFFICIENCY_GOAL = 0.8
MIN_ROUNDS = 2
#: The learner's mean and half-width may differ from the grader's by this much (rounding to 2 decimals: 0.005).
MEAN_TOLERANCE = 0.006


def _record(run: Any) -> dict:
    return {"command": [str(a) for a in getattr(run, "command", [])],
            "events": [[rank, event] for rank, event in run.events]}


def save_rounds(path: str | os.PathLike[str], rounds: Sequence[tuple[Any, Any]]) -> Path:
    """Write ``[(horovod run, bound run), ...]`` (the launchers' ``RunResult``\\ s) to ``path`` as JSON: every
    event each launch printed, with the rank the launcher saw print it, and its command."""
    data = {"rounds": [{"run": _record(run), "bound": _record(bound)} for run, bound in rounds]}
    out = Path(path)
    out.write_text(json.dumps(data) + "\n")
    return out


def _as_run(record: dict) -> SimpleNamespace:
    events = [(int(rank), dict(event)) for rank, event in record["events"]]
    return SimpleNamespace(command=record.get("command", []), events=events,
                           epochs=[e for rank, e in events if rank == 0 and e.get("event") == "epoch"],
                           config=next((e for rank, e in events if rank == 0 and e.get("event") == "config"), None))


def load_rounds(path: str | os.PathLike[str]) -> list[tuple[SimpleNamespace, SimpleNamespace]]:
    """The rounds :func:`save_rounds` wrote, as objects :func:`launch_ratio` reads."""
    data = json.loads(Path(path).read_text())
    return [(_as_run(r["run"]), _as_run(r["bound"])) for r in data["rounds"]]


def _problems(rounds: list[tuple[SimpleNamespace, SimpleNamespace]]) -> list[str]:
    found = []
    if len(rounds) < MIN_ROUNDS:
        found.append(f"{len(rounds)} round(s) recorded; the task asks for at least {MIN_ROUNDS} (an interval needs 2)")
    for index, (run, bound) in enumerate(rounds, 1):
        config = run.config or {}
        if config.get("strategy") != "horovod" or config.get("workers") != spec.WORKERS:
            found.append(f"round {index}: the run is not a Horovod run at {spec.WORKERS} workers "
                         f"(its config says {config.get('strategy')!r}, {config.get('workers')!r} workers)")
        copies = sorted({rank for rank, e in bound.events if e.get("event") == "config"})
        if copies != list(range(spec.WORKERS)):
            found.append(f"round {index}: the bound has copies {copies}, expected {spec.WORKERS} "
                         "(course_lib.runner.multiworker.run_bound with the run's plan)")
            continue
        bound_config = next(e for rank, e in bound.events if rank == 0 and e.get("event") == "config")
        for key in ("per_worker_batch", "steps_per_epoch"):
            if bound_config.get(key) != config.get(key):
                found.append(f"round {index}: the bound's {key} {bound_config.get(key)} is not the run's "
                             f"{config.get(key)}: give both the same --batch-size and --train-subset")
    return found


def recompute(path: str | os.PathLike[str]) -> tuple[Any, list[str]]:
    """The grader's efficiency from the records (a ``Paired``, or ``None``) and what is wrong with them."""
    try:
        rounds = load_rounds(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, [f"cannot read the run records {path}: {exc}; save them with save_rounds"]
    problems = _problems(rounds)
    try:
        ratio = launch_ratio(rounds)
    except ValueError as exc:
        return None, problems + [str(exc)]
    return ratio, problems


def _close(a: Any, b: float) -> bool:
    return isinstance(a, (int, float)) and math.isfinite(a) and abs(a - b) <= MEAN_TOLERANCE


def grade_measure(path: str | os.PathLike[str], mean: Any, ci95: Any, verdict: Any) -> dict[str, Part]:
    """Grade the learner's efficiency (``mean ± ci95``) and verdict against the grader's recomputation.

    Returns:
        ``{"measure_efficiency": Part, "measure_verdict": Part}``.
    """
    ratio, problems = recompute(path)
    points = spec.POINTS
    if ratio is None or problems:
        why = "; ".join(problems)
        return {name: Part(name, 0, points[name], why) for name in ("measure_efficiency", "measure_verdict")}
    parts = {}
    ok = _close(mean, ratio.mean) and _close(ci95, ratio.ci95)
    parts["measure_efficiency"] = Part("measure_efficiency", points["measure_efficiency"] if ok else 0,
                                       points["measure_efficiency"], "" if ok else
                                       f"your efficiency {mean!r} ± {ci95!r} is not what your own records give "
                                       f"(recomputed from them with launch_ratio, to ±{MEAN_TOLERANCE})")
    expected = ratio.at_least(EFFICIENCY_GOAL)
    said = str(verdict).strip().lower() if verdict is not None else ""
    ok = said == expected.lower()
    parts["measure_verdict"] = Part("measure_verdict", points["measure_verdict"] if ok else 0,
                                    points["measure_verdict"], "" if ok else
                                    f"your verdict {verdict!r} does not follow from your interval "
                                    f"(≈{ratio.mean:.2f} ± {ratio.ci95:.2f} against {EFFICIENCY_GOAL})")
    return parts
