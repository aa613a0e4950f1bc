"""The data-parallel bound: N independent copies of a one-worker script, started together, never talking.

No data-parallel method on N workers can beat N workers that do the same work and never communicate. So
the course measures that directly and calls it **the bound**: :func:`run_bound` starts N copies of a
one-worker script at once (under the supervisor of :func:`course_lib.runner.multiworker.run_workers`), each
placed on the cores or GPU a rank of the distributed run would get (on a 2-core CPU machine: one core and one
thread each), each training its own shard of the training set (``COURSE_SHARD=i/N``,
:func:`course_lib.training.machine.placement.shard_from_env`) at the per-worker batch it is given. Each copy
times its epochs after the warm-up epoch, as every course script does; the bound's images/s of an epoch is
the sum of the copies' (:func:`course_lib.lessons.common.efficiency.bound_rates`). A distributed run divided by
its bound is its **distribution efficiency** (at most 1 but for noise).

It is not "one process using every core": that is a second yardstick (what you get without distributing) and
a distributed run can beat it (notebook 02 shows both).

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from course_lib.runner import launchers
from course_lib.runner.preflight import check_int
from course_lib.runner.run import RunResult, run, shared
from course_lib.training.machine.capacity import WorkerPlan
from course_lib.training.machine.placement import SHARD_ENV

__all__ = ["run_bound"]


def run_bound(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, workers: WorkerPlan | int = 2,
              timeout: float | None = 600, env: Mapping[str, str] | None = None, show: str = "rank0",
              output: Any = None, check: bool = True, python: str = sys.executable,
              cwd: str | os.PathLike[str] | None = None, stop_event: threading.Event | None = None,
              on_event: Callable[[dict], None] | None = None, grace_s: Sequence[float] = (3.0, 3.0),
              clock: Callable[[], float] = time.monotonic, wait_for_slots: bool = True) -> RunResult:
    """Run ``workers`` copies of ``python script args`` at once, each on its own share, none talking.

    Args:
        script, script_args: A one-worker script (e.g. ``horovod_fmnist.py`` run without ``horovodrun``,
            ``mirrored_fmnist.py --devices 1``, ``torch_fmnist.py``) and its arguments: the per-worker batch and
            the training subset of the distributed run it bounds (each copy keeps its shard of that subset, so it
            runs the same steps per epoch as one rank).
        workers: The distributed run's ``WorkerPlan`` (or count): the bound holds the same slots and copy ``i``
            runs where rank ``i`` would.
        timeout, env, show, output, check, python, cwd, stop_event, on_event, grace_s, clock, wait_for_slots:
            The launchers' shared options (:class:`course_lib.runner.run.RunOptions`); each copy's lines come
            back tagged as rank ``i``.

    Returns:
        One :class:`RunResult`; its ``events`` hold every copy's ``epoch`` events, tagged with the copy's index.

    Raises:
        LaunchError: Bad input, before anything starts. RunFailedError, RunTimeoutError, RunStoppedError: As in
        :func:`course_lib.runner.launch.run_horovod`.
    """
    count = check_int("workers", workers.workers if isinstance(workers, WorkerPlan) else workers)
    envs = [{SHARD_ENV: f"{index}/{count}"} for index in range(count)]
    return run(launchers.workers(envs), script, script_args, workers, shared(locals()))
