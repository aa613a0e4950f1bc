"""The code task's grader: launch the learner's script at 2 workers and judge the run from what it printed.

:func:`grade_code` launches the script with the course's launcher (:func:`course_lib.runner.launch.run_horovod`,
so the run holds slots, is placed like every course run and is ended with everything it started by the
watchdog) and returns one :class:`Part` per graded property:

``code_weights``
    notebook 03's own check (:func:`course_lib.lessons.horovod.checks.check_horovod_run`): every rank printed the
    same weights digest, and rank 0's epochs ran the steps of ONE worker's shard;
``code_coverage``
    every training image exactly once per epoch, from every rank's ``consumed`` events
    (:func:`course_lib.lessons.common.coverage.check_coverage`, with the size and ranks the grader asked for, not
    the ones the script claims);
``code_checkpoints``
    checkpoints written by rank 0 alone (the launcher tags each line with the rank that printed it), one per
    epoch, the last one holding the final weights, and nothing else in the folder;
``code_lr_rule``
    the rate every rank's optimizer used is the course's rule for 2 workers
    (:func:`course_lib.training.schedules.scaled_lr`: × N for sgd/lars, × √N for adam/lamb);
``code_accuracy``
    rank 0's final test accuracy is at least the pilot's threshold (:mod:`course_lib.assessment.spec`);
``code_time``
    the run finished within the time limit (a multiple of the solution's, scaled by the speed probe), timed from its
    start (after any wait for the machine's slots) to its end.

A launch that fails or runs out of time fails every part, with the tail of the failing rank as the reason.

Introduced in assessment/source/ddp/assessment.ipynb.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from course_lib.assessment import spec
from course_lib.assessment.run_notebook import harden
from course_lib.environment.machine import speed_probe
from course_lib.lessons.common.coverage import check_coverage
from course_lib.lessons.horovod.checks import check_horovod_run  # notebook 03's check, reused
from course_lib.runner.launch import LaunchError, RunFailedError, run_horovod
from course_lib.training.schedules import scaled_lr

__all__ = ["Part", "CodeGrade", "grade_code", "grade_run", "trusted", "assert_part"]


@dataclass(frozen=True)
class Part:
    """One graded property: its points out of ``max_points`` and, when missed, why."""

    name: str
    points: int
    max_points: int
    reason: str = ""

    @property
    def passed(self) -> bool:
        """All its points."""
        return self.points == self.max_points


@dataclass
class CodeGrade:
    """The code task's parts, the run they judged (``None`` when it failed to start) and the limits used."""

    parts: dict[str, Part] = field(default_factory=dict)
    run: Any = None
    threshold: float = math.nan
    time_limit_s: float = math.nan
    launch_s: float = math.nan

    def summary(self) -> str:
        """One line per part: ``code_weights 8/8`` or ``code_time 0/4: …``."""
        return "\n".join(f"{p.name} {p.points}/{p.max_points}" + (f": {p.reason}" if p.reason else "")
                         for p in self.parts.values())


def _part(name: str, ok: bool, reason: str) -> Part:
    points = spec.POINTS[name]
    return Part(name, points if ok else 0, points, "" if ok else reason)


def _weights(run: Any) -> Part:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        ok = check_horovod_run(run, workers=spec.WORKERS)
    return _part("code_weights", ok, printed.getvalue().strip())


def _coverage(run: Any) -> Part:
    train_size = int(spec.SCRIPT_ARGS[spec.SCRIPT_ARGS.index("--train-subset") + 1])
    cov = check_coverage(run, train_size=train_size, readers=spec.WORKERS)
    epochs = int(spec.SCRIPT_ARGS[spec.SCRIPT_ARGS.index("--epochs") + 1])
    if cov.ok and cov.epochs != list(range(1, epochs + 1)):
        return _part("code_coverage", False, f"consumed events for epochs {cov.epochs}, expected 1..{epochs}")
    return _part("code_coverage", cov.ok, str(cov))


def _checkpoints(run: Any, folder: Path) -> Part:
    epochs = int(spec.SCRIPT_ARGS[spec.SCRIPT_ARGS.index("--epochs") + 1])
    saved = [(rank, e) for rank, e in run.events if e.get("event") == "checkpoint"]
    others = sorted({rank for rank, _ in saved if rank != 0})
    if others:
        return _part("code_checkpoints", False, f"ranks {others} saved checkpoints too: save on rank 0 only "
                     "(every rank writing the same folder races, and the copies are the same weights)")
    if [int(e.get("epoch", -1)) for _, e in saved] != list(range(1, epochs + 1)):
        return _part("code_checkpoints", False, f"rank 0 reported checkpoints for epochs "
                     f"{[e.get('epoch') for _, e in saved]}, expected one after each of epochs 1..{epochs}")
    latest = folder / "latest.json"
    if not latest.is_file():
        return _part("code_checkpoints", False, f"no {latest.name} in the checkpoint folder: save with "
                     "course_lib.training.checkpoints.save_checkpoint")
    meta = json.loads(latest.read_text())
    final = run.digests.get(0)
    if int(meta.get("epoch", -1)) != epochs or meta.get("digest") != final:
        return _part("code_checkpoints", False, f"the last checkpoint holds epoch {meta.get('epoch')} with digest "
                     f"{str(meta.get('digest'))[:12]}…, not the final weights (epoch {epochs}, {str(final)[:12]}…)")
    return _part("code_checkpoints", True, "")


def _lr_rule(run: Any) -> Part:
    args = list(spec.SCRIPT_ARGS)
    base, optimizer = float(args[args.index("--lr") + 1]), args[args.index("--optimizer") + 1]
    expected = scaled_lr(optimizer, base, spec.WORKERS)
    used = {(rank, int(e.get("epoch", 0))): float(e["lr"]) for rank, e in run.events
            if e.get("event") == "lr" and isinstance(e.get("lr"), (int, float))}
    ranks = sorted({rank for rank, _ in used})
    if ranks != list(range(spec.WORKERS)):
        return _part("code_lr_rule", False, f"lr events came from ranks {ranks}, expected every rank: keep the "
                     "starter's emit('lr', …) line at the end of each epoch")
    wrong = sorted({round(v, 8) for v in used.values() if not math.isclose(v, expected, rel_tol=1e-5)})
    if wrong:
        return _part("code_lr_rule", False, f"the optimizer's rate was {wrong} with --lr {base} at {spec.WORKERS} "
                     f"workers: scale it by the course's rule for {optimizer} "
                     "(course_lib.training.schedules.scaled_lr)")
    return _part("code_lr_rule", True, "")


def _accuracy(run: Any, threshold: float) -> Part:
    accuracy = (run.result or {}).get("test_accuracy")
    if not isinstance(accuracy, (int, float)):
        return _part("code_accuracy", False, "rank 0 printed no result event with test_accuracy")
    return _part("code_accuracy", accuracy >= threshold,
                 f"test accuracy {accuracy:.4f} is below the threshold {threshold:.3f} (the reference solution's "
                 f"lowest over its pilot seeds minus {spec.ACCURACY_MARGIN})")


def trusted(run: Any) -> Any:
    """The run as its processes really printed it: an event that names a rank (``digest``, ``consumed``, ``lr``)
    counts only when it came from that rank (the launcher tags every line with the rank that printed it), so one
    process cannot print the lines of a rank that never ran (text shaped like another rank's output)."""
    events = [(rank, e) for rank, e in run.events if "rank" not in e or _as_int(e.get("rank")) == rank]
    digests = {rank: str(e.get("digest")) for rank, e in events if e.get("event") == "digest"}
    return SimpleNamespace(events=events, digests=digests, result=getattr(run, "result", None),
                           log=list(getattr(run, "log", [])), command=list(getattr(run, "command", [])))


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def grade_run(run: Any, checkpoint_dir: Path, *, threshold: float, time_limit_s: float,
              launch_s: float) -> CodeGrade:
    """Judge a finished run (the launcher's ``RunResult``) against every code part, from its :func:`trusted` lines."""
    grade = CodeGrade(run=run, threshold=threshold, time_limit_s=time_limit_s, launch_s=launch_s)
    run = trusted(run)
    weights = _weights(run)
    parts = [weights, _coverage(run), _checkpoints(run, checkpoint_dir), _lr_rule(run), _accuracy(run, threshold),
             _part("code_time", launch_s <= time_limit_s,
                   f"the launch took {launch_s:.0f} s, over the limit of {time_limit_s:.0f} s")]
    for part in parts:
        if part.name in ("code_accuracy", "code_time") and not weights.passed:
            # The accuracy and the time of a run whose ranks trained apart are not a data-parallel run's.
            part = Part(part.name, 0, part.max_points, "counts only for a data-parallel run (code_weights)"
                        + (f"; also {part.reason}" if part.reason else ""))
        grade.parts[part.name] = part
    return grade


def grade_code(script: str | os.PathLike[str], *, time_limit: float | None = None, speed_probe_s: float | None = None,
               output: Callable[[str], None] | None = None) -> CodeGrade:
    """Launch ``script`` at :data:`~course_lib.assessment.spec.WORKERS` workers with the grader's arguments and
    judge the run.

    Args:
        script: The learner's training script (the notebook's ``%%writefile`` cell writes it).
        time_limit: Seconds; default :func:`course_lib.assessment.spec.time_limit_s` on this machine.
        speed_probe_s: This machine's speed probe (tests); default: measured now.
        output: Where the run's lines go (default: nowhere; the grade keeps the run's log).

    Returns:
        The :class:`CodeGrade`; a launch that failed or timed out has every part at 0 with the reason.
    """
    pilot = spec.load_pilot()
    if time_limit is None:
        time_limit = spec.time_limit_s(pilot, speed_probe() if speed_probe_s is None else speed_probe_s)
    with tempfile.TemporaryDirectory(prefix="graded-ckpt-") as folder:
        start = time.monotonic()
        try:
            run = run_horovod(Path(script).resolve(), [*spec.SCRIPT_ARGS, "--seed", str(spec.GRADE_SEED),
                                                       "--checkpoint-dir", folder],
                              workers=spec.WORKERS, timeout=time_limit, show="all",
                              output=output or (lambda line: None))
        except (RunFailedError, LaunchError) as exc:
            launch_s = time.monotonic() - start
            reason = str(exc).strip().splitlines()
            why = "the run failed: " + " / ".join(reason[-6:])
            grade = CodeGrade(run=getattr(exc, "result", None), threshold=pilot.threshold,
                              time_limit_s=time_limit, launch_s=launch_s)
            grade.parts = {name: Part(name, 0, points, why) for name, points in spec.POINTS.items()
                           if name.startswith("code_")}
            return grade
        # The run's own time (RunResult.duration_s: from its start to its end, clean-up included), not the wait
        # for slots before it: a busy room must not cost a learner the time part.
        return grade_run(run, Path(folder), threshold=pilot.threshold, time_limit_s=time_limit,
                         launch_s=run.duration_s)


def assert_part(grade: "CodeGrade | dict[str, Part] | Part", name: str) -> None:
    """The hidden test of one part: prints its points, or raises ``AssertionError`` with why it missed.

    Args:
        grade: A :class:`CodeGrade`, a ``{name: Part}`` (the measure task's), or one :class:`Part`.
        name: The part (its nbgrader ``grade_id``).
    """
    parts = grade.parts if isinstance(grade, CodeGrade) else grade if isinstance(grade, dict) else {name: grade}
    part = parts[name]
    assert part.passed, f"{name}: {part.reason}"
    print(f"{name}: {part.points}/{part.max_points}")


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.assessment.code SCRIPT [--result-fd N]``: grade the code task, print (or write to the
    pipe ``N``) its parts as JSON. Run by :meth:`course_lib.assessment.sandbox.Sandbox.grade_code` as the sandbox's
    first process, hardened against the script it launches (:func:`course_lib.assessment.run_notebook.harden`)."""
    parser = argparse.ArgumentParser(description="Grade the assessment's code task.")
    parser.add_argument("script")
    parser.add_argument("--result-fd", type=int, default=None)
    args = parser.parse_args(argv)
    harden(args.result_fd)
    grade = grade_code(args.script)
    text = json.dumps({name: [p.points, p.max_points, p.reason] for name, p in grade.parts.items()})
    if args.result_fd is None:
        print(text)
    else:
        with os.fdopen(args.result_fd, "w") as out:
            out.write(text)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
