"""Launch ``torchrun`` (PyTorch DDP) from a notebook cell like ``horovodrun``: slots, placement, live lines, no leftovers.

:func:`run_torchrun` is :func:`course_lib.runner.launch.run_horovod` for PyTorch, with the same signature and the
same engine (:func:`course_lib.runner.run.run`): it checks its input before anything starts, holds one machine-wide
slot per worker, starts ``python -m torch.distributed.run --standalone --nproc-per-node N --tee 3`` with the ranks
behind the rank wrapper (:mod:`course_lib.runner.place_rank`: each rank on its granted cores, found from torchrun's
``LOCAL_RANK``), streams every line as it comes (torchrun's ``--tee 3`` prefixes each with ``[default<rank>]:``,
parsed by :mod:`course_lib.runner.runlog`), collects the JSON lines into a :class:`RunResult`, and on a failure, a
timeout, a stop request, an interrupt or the caller's death ends every process of the run. ``python=`` names the
interpreter that has torch: notebook 07 passes the second venv's (``.venv-07``,
:func:`course_lib.environment.frameworks.frameworks_python`); the notebook's own kernel needs no torch. torchrun's
per-rank log files go to a temporary folder that is removed when the run ends. The command is
:func:`course_lib.runner.launchers.torchrun`'s.

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from course_lib.runner import launchers
from course_lib.runner.launchers import build_torchrun_command, check_torch
from course_lib.runner.run import RunResult, run, shared
from course_lib.training.machine.capacity import WorkerPlan

__all__ = ["build_torchrun_command", "check_torch", "run_torchrun"]


def run_torchrun(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, workers: WorkerPlan | int = 1,
                 timeout: float | None = None, env: Mapping[str, str] | None = None, show: str = "rank0",
                 output: Any = None, check: bool = True, python: str = sys.executable,
                 cwd: str | os.PathLike[str] | None = None, stop_event: threading.Event | None = None,
                 on_event: Callable[[dict], None] | None = None, grace_s: Sequence[float] = (3.0, 3.0),
                 clock: Callable[[], float] = time.monotonic, wait_for_slots: bool = True,
                 extra_torchrun_args: Sequence[str] = ()) -> RunResult:
    """Run ``torchrun --standalone --nproc-per-node N script args`` on this machine, live.

    Args:
        script: The DDP script (``source_code/ddp_fmnist.py``; it reads ``RANK``/``WORLD_SIZE`` through
            ``torch.distributed.init_process_group``).
        script_args: Arguments of the script, each a ``str``.
        workers: A ``WorkerPlan`` or a number of processes, as in :func:`course_lib.runner.launch.run_horovod`.
        timeout, ...: The shared options (:class:`course_lib.runner.run.RunOptions`); ``python`` must have torch.
            ``OMP_NUM_THREADS`` defaults to 1 (each rank sets its threads from its share).
        extra_torchrun_args: More torchrun arguments, e.g. ``["--max-restarts", "1"]``.

    Returns:
        The :class:`RunResult`: rank-tagged lines, JSON events, return code, pids, placement.

    Raises:
        LaunchError: Bad input, a ``python`` without torch, more workers than slots (without oversubscribing).
        SlotsBusyError, RunFailedError, RunTimeoutError, RunStoppedError, KeyboardInterrupt: As in ``run_horovod``
        (every process of the run is ended first).
    """
    log_root = tempfile.mkdtemp(prefix="course-torchrun-")  # a fixed name inside: the command line reads the same
    try:
        launcher = launchers.torchrun(extra_torchrun_args, log_dir=os.path.join(log_root, "torchrun-logs"))
        return run(launcher, script, script_args, workers, shared(locals()))
    finally:
        shutil.rmtree(log_root, ignore_errors=True)
