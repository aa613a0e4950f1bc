"""Section 1f of ``make bench``: notebook 07's four ways, each against its own bound, in rounds fixed before the run.

The launches are notebook 07's (:mod:`course_lib.lessons.frameworks.job`): MirroredStrategy, Horovod, PyTorch DDP
and Keras 3 on JAX on 2 workers, and the bounds they need (``horovod_fmnist.py``, ``torch_fmnist.py`` and
``keras3_fmnist.py`` as 2 one-worker copies each, :func:`course_lib.runner.multiworker.run_bound`), all with one job's
flags, every round in ``round_order`` (reversed every other round). Each way's distribution efficiency is taken over
rounds, its launch over its bound's launch of the same round
(:func:`course_lib.lessons.frameworks.frameworks.efficiency_rows`), and printed in the course's one format.

The round count is declared before anything runs (:data:`ROUNDS`, or ``rounds=``), chosen from a pilot so that each
efficiency's 95 % interval is at most ±0.05 (:func:`course_lib.lessons.frameworks.frameworks.rounds_needed`; the
notebook's own lines print that estimate from its 3 rounds). A section that ends wider than ±0.05 says so
(``resolution_line``) rather than pick a better day.

``benchmarks/run.py`` (the lead's) calls :func:`frameworks_section` for section ``1f`` and writes the returned dict
into the day's results file; nothing here writes files.

Plain Python; tested with fake launches in tests/test_frameworks_scripts.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["ROUNDS", "TRAIN_SUBSET", "EPOCHS", "frameworks_section"]

REPO = Path(__file__).resolve().parents[1]

#: Rounds, declared before the run, from a quiet pilot of this job (2026-12-02 09:29Z, Intel Xeon 2-core VM, 3 rounds,
#: 297 s: results/2026-12-02-vm-section1f-pilot.md): the largest ``rounds_needed`` for ±0.05 was 10 (Horovod; the
#: others 4, 4 and resolved in 3), so 12 rounds with a margin. Pilot again on another machine before its headline run.
ROUNDS = 12
#: Training images per launch (all workers together) and epochs per launch (the first the warm-up): 4x the
#: notebook's images, so an epoch is 32 steps per worker and one slow step moves it less.
TRAIN_SUBSET = 4096
EPOCHS = 3


def frameworks_section(*, rounds: int = ROUNDS, train_subset: int = TRAIN_SUBSET, epochs: int = EPOCHS,
                       workers: int = 2, ways: Sequence[str] | None = None, frameworks_python: str | None = None,
                       half_width: float = 0.05, timeout_s: float = 900,
                       printer: Callable[[str], None] = print,
                       run_rounds: Callable[..., list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Run section 1f and return what the results file records.

    Args:
        rounds: Rounds, declared before the run (default :data:`ROUNDS`).
        train_subset, epochs: The job (every way and bound runs the same flags, ``job.job_args``).
        workers: Workers of every way (slots of the machine: 2 on the course's VM).
        ways: The ways (default: all four).
        frameworks_python: ``.venv-07``'s python (default: ``course_lib.environment.frameworks.frameworks_python``).
        half_width: The precision the section is sized for (±0.05).
        timeout_s: Per launch.
        printer: Where progress and the result lines go.
        run_rounds: :func:`course_lib.lessons.frameworks.job.run_rounds` (a fake in tests).

    Returns:
        ``{"section": "1f", "declared_rounds", "job": [...flags], "ways": [{"way", "bound", "efficiency",
        "ci95", "rounds", "line", "resolved", "resolution", "images_per_sec", "bound_images_per_sec",
        "bound_ci95"}], "same_job": bool, "job_lines": [...]}``.
    """
    from course_lib.lessons.frameworks import frameworks, job

    if frameworks_python is None:
        from course_lib.environment.frameworks import frameworks_python as find

        frameworks_python = str(find())
    run_rounds = run_rounds or job.run_rounds
    args = job.job_args(train_subset=train_subset, epochs=epochs)
    chosen = [w.name for w in job.WAYS] if ways is None else list(ways)
    printer(f"section 1f: {len(chosen)} ways against their bounds, {rounds} rounds declared, job {' '.join(args)}")
    done = run_rounds(rounds, args, code=REPO / "source_code", plan=workers, frameworks_python=frameworks_python,
                      ways=chosen, timeout=timeout_s, output=lambda line: None, say=printer)
    readers = {"MirroredStrategy": 1, "Keras 3 + JAX": 1}
    rows = [frameworks.job_row(way, done[0][way], replicas=workers, readers=readers.get(way)) for way in chosen]
    one_job, job_lines = frameworks.same_job(rows)
    out: list[dict[str, Any]] = []
    for row in frameworks.efficiency_rows(done, chosen, job.BOUND_OF):
        ratio = row["efficiency"]
        resolution = frameworks.resolution_line(row["way"], ratio, half_width=half_width)
        out.append({"way": row["way"], "bound": row["bound"], "efficiency": ratio.mean, "ci95": ratio.ci95,
                    "rounds": ratio.pairs, "line": row["line"], "resolved": resolution.endswith(": True"),
                    "resolution": resolution, "images_per_sec": row["images/s"],
                    "bound_images_per_sec": row["bound images/s"], "bound_ci95": row["bound ci95"]})
        printer(row["line"])
        printer(resolution)
    for line in job_lines:
        printer(line)
    return {"section": "1f", "declared_rounds": rounds, "job": args, "ways": out, "same_job": one_job,
            "job_lines": job_lines}
