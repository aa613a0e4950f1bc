"""Runs beyond ``horovodrun -np N``: elastic Horovod, several python workers, plain ``mpirun``.

* :func:`run_elastic` — ``horovodrun --min-np/--max-np --host-discovery-script`` (Horovod
  Elastic, always Gloo); on one machine the host list names it twice (``localhost`` and
  ``127.0.0.1``) because a failed worker blacklists its whole host.
* :func:`run_workers` / :func:`run_multiworker` — several ``python`` processes, each with its own
  environment (e.g. ``TF_CONFIG`` for MultiWorkerMirroredStrategy), under the small supervisor
  :mod:`course_lib.runner.procs.supervise`: it tags every line ``[i]<stdout>:`` like Horovod's Gloo
  launcher and ends the others when one fails, so the result is one :class:`RunResult`.
* :func:`run_mpirun` — the ``mpirun`` line that ``horovodrun --mpi`` would build, run as is.
* :func:`run_bound` — **the data-parallel bound** (notebook 02): N copies of a one-worker script started together,
  each on the cores or GPU a rank would get and on its own shard of the training set (``COURSE_SHARD=i/N``,
  :func:`course_lib.training.machine.placement.shard_from_env`), never communicating. No data-parallel method on N
  workers can beat N workers that do the same work and skip the communication, so a run over its bound is its
  distribution efficiency (:mod:`course_lib.lessons.common.efficiency`). It is not "one process using every core":
  that yardstick can be beaten.

Fault drills (kill a worker mid-epoch, read the group sizes) are in :mod:`course_lib.runner.faults`.

Each has the one signature of :func:`course_lib.runner.launch.run_horovod` (script, script_args, ``workers=``,
the shared options, at most one option of its own) and runs through the one engine
(:func:`course_lib.runner.run.run`): the same checks before anything starts, the same machine-wide slots and
placement, the same zero-orphan clean-up.

Introduced in notebooks/06_beyond_one_machine.ipynb.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from course_lib.runner import launchers
from course_lib.runner.launchers import (
    DISCOVERY_SCRIPT, LOCAL_HOSTS, Elastic, build_elastic_command, build_mpirun_command)
from course_lib.runner.preflight import LaunchError, check_int, check_ports, check_worker_range
from course_lib.runner.run import RunResult, run, shared
from course_lib.training.machine.capacity import WorkerPlan
from course_lib.training.machine.placement import SHARD_ENV

__all__ = ["DISCOVERY_SCRIPT", "LOCAL_HOSTS", "check_worker_range", "check_ports", "free_ports",
           "tf_config", "Elastic", "build_elastic_command", "build_mpirun_command", "run_elastic",
           "run_workers", "run_multiworker", "run_mpirun", "run_bound"]


def free_ports(count: int, host: str = "localhost") -> list[int]:
    """``count`` distinct ports that are free right now (the OS picks them)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(check_int("count", count))]
    try:
        for sock in socks:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def tf_config(ports: Sequence[int], index: int, host: str = "localhost") -> str:
    """The ``TF_CONFIG`` JSON of worker ``index`` in a cluster of ``host:port`` workers."""
    return json.dumps({"cluster": {"worker": [f"{host}:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def _need_timeout(timeout: float | None) -> None:
    if timeout is None:
        raise LaunchError("timeout=None: a worker can wait forever for a missing peer; pass "
                          "timeout= in seconds, e.g. 300")


def run_elastic(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, workers: WorkerPlan | int = 2,
                timeout: float | None = 300, env: Mapping[str, str] | None = None, show: str = "rank0",
                output: Any = None, check: bool = True, python: str = sys.executable,
                cwd: str | os.PathLike[str] | None = None, stop_event: threading.Event | None = None,
                on_event: Callable[[dict], None] | None = None, grace_s: Sequence[float] = (3.0, 3.0),
                clock: Callable[[], float] = time.monotonic, wait_for_slots: bool = True,
                elastic: Elastic | None = None) -> RunResult:
    """Run a Horovod Elastic job, live: it starts with ``workers`` and keeps going with any number between
    ``elastic.min_workers`` and ``elastic.max_workers``.

    Args:
        script, script_args: The elastic training script and its arguments.
        workers: The workers it starts with (a ``WorkerPlan`` or a count). On this machine the run holds
            ``max_workers`` slots (the most it can grow to); a worker that re-joins gets its host slot's share.
        timeout, ...: The shared options, as in :func:`course_lib.runner.launch.run_horovod` (``timeout``
            defaults to 300).
        elastic: Its own options (:class:`Elastic`: worker range, hosts, discovery script, ...).

    Returns:
        The :class:`RunResult` (use :func:`course_lib.runner.faults.world_sizes` for the sizes the group went
        through).

    Raises:
        LaunchError: Bad input (min > max, malformed hosts, missing script), before launching.
        RunFailedError, RunTimeoutError, RunStoppedError: As in ``run_horovod``.
    """
    return run(launchers.elastic(elastic or Elastic()), script, script_args, workers, shared(locals()))


def run_workers(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, workers: WorkerPlan | int = 1,
                timeout: float | None = None, env: Mapping[str, str] | None = None, show: str = "rank0",
                output: Any = None, check: bool = True, python: str = sys.executable,
                cwd: str | os.PathLike[str] | None = None, stop_event: threading.Event | None = None,
                on_event: Callable[[dict], None] | None = None, grace_s: Sequence[float] = (3.0, 3.0),
                clock: Callable[[], float] = time.monotonic, wait_for_slots: bool = True,
                worker_envs: Sequence[Mapping[str, str]] = ()) -> RunResult:
    """Run ``python script args`` once per entry of ``worker_envs``, as one supervised run.

    Worker ``i`` gets the current environment plus ``env`` plus ``worker_envs[i]``; its lines
    come back tagged as rank ``i``. When one worker fails, the others are ended (a collective
    would otherwise wait for it), and the run's status is the failed worker's.

    Args:
        script, script_args: As in :func:`course_lib.runner.launch.run_horovod`.
        workers: As many as ``worker_envs`` (a ``WorkerPlan`` or a count). The group holds one slot per
            worker, and worker ``i`` runs on share ``i``.
        timeout, ...: The shared options, as in ``run_horovod``; ``timeout`` is required (a worker may wait
            forever for a missing peer).
        worker_envs: One mapping of extra variables per worker (at least one).

    Returns:
        One :class:`RunResult` for all workers.

    Raises:
        LaunchError: Bad input, before anything is launched.
        RunFailedError, RunTimeoutError, RunStoppedError: As in ``run_horovod``.
    """
    _need_timeout(timeout)
    return run(launchers.workers(worker_envs), script, script_args, workers, shared(locals()))


def run_multiworker(script: str | os.PathLike[str], script_args: Sequence[str] = (), *,
                    workers: WorkerPlan | int = 2, timeout: float | None = 300,
                    env: Mapping[str, str] | None = None, show: str = "rank0", output: Any = None,
                    check: bool = True, python: str = sys.executable, cwd: str | os.PathLike[str] | None = None,
                    stop_event: threading.Event | None = None, on_event: Callable[[dict], None] | None = None,
                    grace_s: Sequence[float] = (3.0, 3.0), clock: Callable[[], float] = time.monotonic,
                    wait_for_slots: bool = True, ports: Sequence[int] | None = None) -> RunResult:
    """Run a MultiWorkerMirroredStrategy script as ``workers`` local processes.

    Each worker gets ``TF_CONFIG`` with the whole cluster (``localhost:port`` each) and its own
    index; ``ports`` default to free ones. The other arguments as in :func:`run_workers` (``timeout``
    defaults to 300).

    Raises:
        LaunchError: A port in use or repeated, a bad ``workers``, or no ``timeout``.
    """
    count = check_int("workers", workers.workers if isinstance(workers, WorkerPlan) else workers)
    chosen = free_ports(count) if ports is None else check_ports(list(ports))
    if len(chosen) != count:
        raise LaunchError(f"{len(chosen)} ports for {count} workers; give one port each")
    _need_timeout(timeout)
    envs = [{"TF_CONFIG": tf_config(chosen, i)} for i in range(count)]
    return run(launchers.workers(envs), script, script_args, workers, shared(locals()))


def run_mpirun(script: str | os.PathLike[str], script_args: Sequence[str] = (), *, workers: WorkerPlan | int = 2,
               timeout: float | None = None, env: Mapping[str, str] | None = None, show: str = "rank0",
               output: Any = None, check: bool = True, python: str = sys.executable,
               cwd: str | os.PathLike[str] | None = None, stop_event: threading.Event | None = None,
               on_event: Callable[[dict], None] | None = None, grace_s: Sequence[float] = (3.0, 3.0),
               clock: Callable[[], float] = time.monotonic, wait_for_slots: bool = True,
               hosts: str | None = None) -> RunResult:
    """Run a Horovod script under plain Open MPI ``mpirun`` (what ``horovodrun --mpi`` builds).

    Args:
        hosts: ``host:slots,...``; default ``localhost:<workers>``.
        script, script_args, workers, timeout, ...: As in :func:`course_lib.runner.launch.run_horovod`: on this
            machine the run holds one slot per worker, and rank ``r`` (``OMPI_COMM_WORLD_RANK``) runs on share ``r``.

    Raises:
        LaunchError: Bad input or no ``mpirun``, before anything is launched.
    """
    return run(launchers.mpirun(hosts), script, script_args, workers, shared(locals()))


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
