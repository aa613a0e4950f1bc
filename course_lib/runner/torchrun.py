"""Launch ``torchrun`` (PyTorch DDP) from a notebook cell like ``horovodrun``: slots, placement, live lines, no leftovers.

:func:`run_torchrun` is :func:`course_lib.runner.launch.run_horovod` for PyTorch: it checks its input before
anything starts, holds one machine-wide slot per worker (:mod:`course_lib.runner.slots`), starts
``python -m torch.distributed.run --standalone --nproc-per-node N --tee 3`` with the ranks behind the rank wrapper
(:mod:`course_lib.runner.place_rank`: each rank on its granted cores, found from torchrun's ``LOCAL_RANK``), streams
every line as it comes (torchrun's ``--tee 3`` prefixes each with ``[default<rank>]:``, parsed by
:mod:`course_lib.runner.runlog`), collects the JSON lines into a :class:`RunResult`, and on a failure, a timeout, a stop
request, an interrupt or the caller's death ends every process of the run (the watchdog of
:mod:`course_lib.runner.execute`). ``python=`` names the interpreter that has torch: notebook 07 passes the second
venv's (``.venv-07``, :func:`course_lib.environment.frameworks.frameworks_python`); the notebook's own kernel needs no
torch. torchrun's per-rank log files go to a temporary folder that is removed when the run ends.

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Sequence, Unpack

from course_lib.runner.execute import execute
from course_lib.runner.options import Launch, RunOptions
from course_lib.runner.preflight import LaunchError, check_script, check_strings
from course_lib.runner.runlog import RunResult
from course_lib.runner.slots import RANK_WRAPPER, plan_placement

__all__ = ["build_torchrun_command", "check_torch", "run_torchrun"]


def build_torchrun_command(python: str, num_workers: int, program: Sequence[str], *, log_dir: str,
                           wrapper: Sequence[str] = (), extra: Sequence[str] = ()) -> list[str]:
    """The ``torchrun`` argument list (no validation; see :func:`run_torchrun`).

    Args:
        python: The interpreter with torch (it runs torchrun; without ``wrapper`` it also runs the ranks).
        program: ``[script, *args]``.
        log_dir: torchrun's ``--log-dir`` (its per-rank copies of the output).
        wrapper: The rank wrapper of a placed run; the ranks are then ``wrapper python script args`` (``--no-python``).
        extra: More torchrun arguments (``--max-restarts 1``), placed before the program.
    """
    command = [python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
               "--nproc-per-node", str(num_workers), "--tee", "3", "--log-dir", log_dir, *extra]
    if wrapper:
        return command + ["--no-python", *wrapper, python, *program]
    return command + list(program)


def check_torch(python: str) -> None:
    """Raise :class:`LaunchError` unless ``python`` imports ``torch.distributed`` (asked in a short subprocess)."""
    try:
        probe = subprocess.run([python, "-c", "import torch.distributed"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"python={python!r} could not be asked for torch ({exc})") from None
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise LaunchError(f"python={python!r} has no torch ({last}); notebook 07's venv has it: run `make setup` "
                          "(tools/setup_frameworks.sh), or pass python= an interpreter with torch")


def run_torchrun(script: str | os.PathLike[str], num_workers: int, script_args: Sequence[str] = (), *,
                 extra_torchrun_args: Sequence[str] = (), **options: Unpack[RunOptions]) -> RunResult:
    """Run ``torchrun --standalone --nproc-per-node N script args`` on this machine, live.

    Args:
        script: The DDP script (``source_code/ddp_fmnist.py``; it reads ``RANK``/``WORLD_SIZE`` through
            ``torch.distributed.init_process_group``).
        num_workers: Number of processes (a positive int).
        script_args: Arguments of the script, each a ``str``.
        extra_torchrun_args: More torchrun arguments, e.g. ``["--max-restarts", "1"]``.
        **options: The launchers' shared keywords (:class:`course_lib.runner.options.RunOptions`); ``python``
            must have torch. ``OMP_NUM_THREADS`` defaults to 1 (each rank sets its threads from its share).

    Returns:
        The :class:`RunResult`: rank-tagged lines, JSON events, return code, pids, placement.

    Raises:
        LaunchError: Bad input, a ``python`` without torch, more workers than slots (without ``oversubscribe``).
        SlotsBusyError, RunFailedError, RunTimeoutError, RunStoppedError, KeyboardInterrupt: As in ``run_horovod``
        (every process of the run is ended first).
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise LaunchError(f"num_workers={num_workers!r} must be a positive int, e.g. 2")
    run = Launch.of(options)
    path = check_script(script, run.cwd)
    args = check_strings("script_args", script_args)
    extra = check_strings("extra_torchrun_args", extra_torchrun_args)
    check_torch(run.python)
    place = plan_placement(num_workers, device=run.device, oversubscribe=run.oversubscribe)
    run = run.but(env={"OMP_NUM_THREADS": "1", **dict(run.env or {})})
    log_root = tempfile.mkdtemp(prefix="course-torchrun-")  # a fixed name inside: the command line reads the same
    try:
        command = build_torchrun_command(run.python, num_workers, [str(path), *args],
                                         log_dir=os.path.join(log_root, "torchrun-logs"),
                                         wrapper=RANK_WRAPPER if place else (), extra=extra)
        return execute(run.but(command=command, launcher="torchrun", place=place, script=path.name))
    finally:
        shutil.rmtree(log_root, ignore_errors=True)
