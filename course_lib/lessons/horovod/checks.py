"""Self-check of notebook 03's coding exercise: is the learner's script a working Horovod run?

:func:`check_horovod_run` (``03.horovod_script``) reads only what the learner's run printed (the ranks' weights
digests, rank 0's Keras progress lines), never a stored answer. It prints and returns its verdict the one way
:mod:`course_lib.lessons.common.checks` defines.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import re
from typing import Any

from course_lib.lessons.common.checks import right, waiting, wrong
from course_lib.runner.runlog import parse_line
from course_lib.training.epochs import EpochPlan

__all__ = ["check_horovod_run", "steps_shown"]

_KERAS_STEPS = re.compile(r"^\s*(\d+)/(\d+) - ")  # Keras verbose=2: "24/24 - 3s - loss: ..."


def _flag(command: list[str], name: str, default: int) -> int:
    """The int value of ``--name`` in an argument list, else ``default``."""
    for i, arg in enumerate(command):
        if arg == name and i + 1 < len(command):
            return int(command[i + 1])
        if arg.startswith(name + "="):
            return int(arg.split("=", 1)[1])
    return default


def steps_shown(run: Any) -> list[int]:
    """Steps per epoch that rank 0's Keras progress lines (``verbose=2``) report, one per epoch."""
    steps = []
    for line in run.log:
        rank, _stream, text, _event = parse_line(line)
        match = _KERAS_STEPS.match(text) if rank == 0 else None
        if match and match.group(1) == match.group(2):
            steps.append(int(match.group(1)))
    return steps


def check_horovod_run(run: Any, *, workers: int = 2) -> bool:
    """Self-check of the coding exercise of notebooks/03_horovod.ipynb: is this a working Horovod run?

    The learner turns ``source_code/keras_fmnist.py`` into a Horovod script and runs it with
    ``launch.run_horovod(script, [...], workers=plan)``. The check reads only what that run printed,
    so it holds no answer to copy: every rank reported the same weights digest (the gradients were
    averaged and the start broadcast), and rank 0's epochs ran
    ``ceil(train_subset / (batch_size × workers))`` steps (the data was divided among the workers), as
    ``course_lib.training.epochs.EpochPlan`` counts them.

    Args:
        run: The ``RunResult`` of ``course_lib.runner.launch.run_horovod``.
        workers: The number of workers the run was asked for.

    Returns:
        True when every property holds; prints what failed and a hint otherwise.
    """
    key = "03.horovod_script"
    if run is None:
        return waiting(key, "not run yet", "run your script with launch.run_horovod, then this cell.")
    problems = []
    ranks = sorted(getattr(run, "digests", {}))
    if ranks != list(range(workers)):
        problems.append(f"digest lines came from ranks {ranks}, expected {list(range(workers))}: print the "
                        "digest on every rank, with its own rank (hvd.rank())")
    elif len(set(run.digests.values())) != 1:
        problems.append("the ranks ended with DIFFERENT weights: are the gradients averaged "
                        "(hvd.DistributedOptimizer) and rank 0's start broadcast before the first step "
                        "(hvd_tf.broadcast_variables, or hvd.callbacks.BroadcastGlobalVariablesCallback(0))?")
    command = [str(arg) for arg in getattr(run, "command", [])]
    expected = EpochPlan(_flag(command, "--train-subset", 60000), _flag(command, "--batch-size", 128),
                         workers).steps_per_epoch
    shown = steps_shown(run)
    if not shown:
        problems.append("rank 0 printed no Keras progress line ('N/N - ...'): keep verbose=2 on rank 0")
    elif any(steps != expected for steps in shown):
        problems.append(f"each epoch ran {shown[0]} steps: is one epoch one pass over the data by ALL workers "
                        "together (each worker reads its shard and runs 1/size of the steps)?")
    if problems:
        return wrong(key, "\n- " + "\n- ".join(problems), "compare your script with the three things every "
                     "Horovod script does: one worker's share of the data, averaged gradients, one common start")
    return right(key, f"{workers} ranks with identical weights, {shown[0]} steps per epoch each")
