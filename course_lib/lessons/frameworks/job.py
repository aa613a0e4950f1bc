"""Notebook 07's one job, four ways, each beside its own bound: what is launched, and in which order.

The job: the course CNN, Fashion-MNIST, the same per-worker batch, training subset, epochs and learning rate
(``--lr`` for every way, ``--scale-lr`` for all or none) on ``workers`` workers. Four ways run it
(MirroredStrategy, Horovod, PyTorch DDP, Keras 3 on JAX), and each way's **bound**
(:func:`course_lib.runner.multiworker.run_bound`) runs its one-worker script as N copies, each on a rank's core and
shard, never communicating: ``torch_fmnist.py`` for DDP, ``keras3_fmnist.py`` for Keras 3 on JAX, and for both
TensorFlow ways ``horovod_fmnist.py`` without ``horovodrun`` (the very tf_keras per-worker step a Horovod rank
runs, pinned to one core with one thread by the course's placement; a MirroredStrategy replica runs the same
tf_keras model and batch, so one bound launch per round serves both TF ways). Every script times its epochs with
the course's one meter (:mod:`course_lib.training.throughput`): from the end of step 1, the first epoch the
warm-up. :func:`run_rounds` launches all of them once per round, in :func:`~course_lib.lessons.common.paired_runs.
round_order` (reversed every other round), so that each way is paired with its bound launch by launch.

Used by notebooks/07_frameworks.ipynb and by ``benchmarks/frameworks.py`` (the ``make bench`` section that runs
the same launches in more rounds).

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from course_lib.lessons.common.paired_runs import round_order
from course_lib.runner import launch as launcher
from course_lib.runner.multiworker import run_bound
from course_lib.runner.torchrun import run_torchrun

__all__ = ["Launch", "WAYS", "BOUNDS", "BOUND_OF", "job_args", "launches", "launch", "run_rounds", "by_way"]


@dataclass(frozen=True)
class Launch:
    """One thing a round launches.

    Attributes:
        name: As printed (``"PyTorch DDP"``, ``"torch bound"``).
        launcher: ``"python"`` (one process holding every worker's cores), ``"horovod"``, ``"torchrun"`` or
            ``"bound"`` (:func:`course_lib.runner.multiworker.run_bound`).
        script: The script in ``source_code/``.
        args: Its arguments before the job's (``--devices N``); ``{workers}`` is replaced by the worker count.
        frameworks_venv: Runs from ``.venv-07`` (PyTorch, JAX) instead of the course's ``.venv``.
    """

    name: str
    launcher: str
    script: str
    args: tuple[str, ...] = ()
    frameworks_venv: bool = False


#: The four ways, in the order the notebook shows them.
WAYS = (
    Launch("MirroredStrategy", "python", "mirrored_fmnist.py", ("--devices", "{workers}")),
    Launch("Horovod", "horovod", "horovod_fmnist.py"),
    Launch("PyTorch DDP", "torchrun", "ddp_fmnist.py", frameworks_venv=True),
    Launch("Keras 3 + JAX", "python", "jax_fmnist.py", ("--devices", "{workers}"), frameworks_venv=True),
)

#: The bounds: each way's one-worker script, as N copies (run_bound).
BOUNDS = (
    Launch("tf_keras bound", "bound", "horovod_fmnist.py"),
    Launch("torch bound", "bound", "torch_fmnist.py", frameworks_venv=True),
    Launch("Keras 3 bound", "bound", "keras3_fmnist.py", frameworks_venv=True),
)

#: Which bound each way is divided by.
BOUND_OF = {"MirroredStrategy": "tf_keras bound", "Horovod": "tf_keras bound", "PyTorch DDP": "torch bound",
            "Keras 3 + JAX": "Keras 3 bound"}


def job_args(*, train_subset: int, epochs: int, batch_size: int = 64, test_subset: int = 512,
             lr: float = 1e-3, scale_lr: bool = False) -> list[str]:
    """The job's arguments, the same for every way and bound (each script's flags have these names).

    Args:
        train_subset: Training images per epoch, all workers together (each bound copy keeps its shard).
        epochs: Epochs per launch; the first is the warm-up.
        batch_size: Images per step per worker (per replica).
        test_subset: Test images.
        lr: Adam's rate, ``--lr`` of every script.
        scale_lr: Add ``--scale-lr`` to every script (the course's rule, ``schedules.scaled_lr``): all or none.

    Returns:
        The argument list, ``--json`` included.
    """
    return ["--train-subset", str(train_subset), "--test-subset", str(test_subset), "--epochs", str(epochs),
            "--batch-size", str(batch_size), "--lr", f"{lr:g}", *(["--scale-lr"] if scale_lr else []), "--json"]


def launches(workers: int, ways: Sequence[str] | None = None) -> list[Launch]:
    """The launches of one round, in base order: each chosen way, then the bounds they need.

    Args:
        workers: Workers (replicas) of every way.
        ways: Names from :data:`WAYS` (default: all four).

    Raises:
        ValueError: An unknown way.
    """
    known = {w.name: w for w in WAYS}
    chosen = list(known) if ways is None else list(ways)
    unknown = [w for w in chosen if w not in known]
    if unknown:
        raise ValueError(f"unknown way(s) {unknown}; choose from {list(known)}")
    needed = {BOUND_OF[w] for w in chosen}
    out = [Launch(w.name, w.launcher, w.script, tuple(a.format(workers=workers) for a in w.args), w.frameworks_venv)
           for w in (known[name] for name in chosen)]
    return out + [b for b in BOUNDS if b.name in needed]


def launch(item: Launch, args: Sequence[str], *, code: Path, plan: Any, frameworks_python: str,
           extra: Sequence[str] = (), **options: Any) -> Any:
    """Launch ``item`` with the job's ``args`` on ``plan``'s workers and return its ``RunResult``.

    Args:
        item: A :class:`Launch`.
        args: :func:`job_args`.
        code: The folder of the course's scripts (``source_code``).
        plan: The workers' :class:`~course_lib.training.machine.capacity.WorkerPlan`.
        frameworks_python: ``.venv-07``'s python.
        extra: More arguments for this launch only (``--step-split 5``).
        options: The launchers' shared options (``timeout``, ``output``, ``show``, ...).
    """
    python = frameworks_python if item.frameworks_venv else sys.executable
    script, all_args = code / item.script, [*item.args, *args, *extra]
    if item.launcher == "horovod":
        return launcher.run_horovod(script, all_args, workers=plan, python=python, **options)
    if item.launcher == "torchrun":
        return run_torchrun(script, all_args, workers=plan, python=python, **options)
    if item.launcher == "bound":
        return run_bound(script, all_args, workers=plan, python=python, **options)
    return launcher.run_python(script, all_args, workers=plan, python=python, **options)


def run_rounds(rounds: int, args: Sequence[str], *, code: Path, plan: Any, frameworks_python: str,
               ways: Sequence[str] | None = None, extra: Callable[[int, str], Sequence[str]] | None = None,
               say: Callable[[str], None] = print, **options: Any) -> list[dict[str, Any]]:
    """Run every launch of :func:`launches` once per round, in ``round_order`` (reversed every other round).

    Args:
        rounds: How many rounds.
        args: :func:`job_args`.
        code, plan, frameworks_python, options: As :func:`launch`.
        ways: The ways to run (default: all four).
        extra: ``(round, launch name) -> more arguments`` (the step split in one launch).
        say: Where the one line per launch goes (``"round 1: PyTorch DDP"``).

    Returns:
        One ``{launch name: RunResult}`` per round, in the order the rounds ran.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    workers = plan.workers if hasattr(plan, "workers") else int(plan)
    base = launches(workers, ways)
    done: list[dict[str, Any]] = []
    for index in range(rounds):
        runs: dict[str, Any] = {}
        for item in round_order(base, index):
            say(f"round {index + 1} of {rounds}: {item.name}")
            runs[item.name] = launch(item, args, code=code, plan=plan, frameworks_python=frameworks_python,
                                     extra=extra(index, item.name) if extra else (), **options)
        done.append(runs)
    return done


def by_way(rounds: Sequence[Mapping[str, Any]], way: str) -> list[tuple[Any, Any]]:
    """``[(way's launch, its bound's launch) per round]``: the pairs :func:`launch_ratio` takes."""
    return [(r[way], r[BOUND_OF[way]]) for r in rounds]
