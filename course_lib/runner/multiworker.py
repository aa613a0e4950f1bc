"""Runs beyond ``horovodrun -np N``: elastic Horovod, several python workers, plain ``mpirun``.

* :func:`run_elastic` — ``horovodrun --min-np/--max-np --host-discovery-script`` (Horovod
  Elastic, always Gloo); on one machine the host list names it twice (``localhost`` and
  ``127.0.0.1``) because a failed worker blacklists its whole host.
* :func:`run_workers` / :func:`run_multiworker` — several ``python`` processes, each with its own
  environment (e.g. ``TF_CONFIG`` for MultiWorkerMirroredStrategy), under the small supervisor
  :mod:`course_lib.runner.supervise`: it tags every line ``[i]<stdout>:`` like Horovod's Gloo
  launcher and ends the others when one fails, so the result is one :class:`RunResult`.
* :func:`run_mpirun` — the ``mpirun`` line that ``horovodrun --mpi`` would build, run as is.

Fault drills (kill a worker mid-epoch, read the group sizes) are in :mod:`course_lib.runner.faults`.

All of them stream, time out, stop and clean up through :func:`course_lib.runner.execute.execute`
(the glue of ``run_horovod``: the same zero-orphan guarantee), check their input before anything
starts, with the port, host and worker-range checks of :mod:`course_lib.runner.preflight`, and hold
this machine's slots like ``run_horovod`` (:func:`course_lib.runner.slots.plan_placement`: the same
queue, the same "who holds the slots" message, each rank on its own granted cores or GPU).

Introduced in notebooks/06_beyond_one_machine.ipynb.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence, Unpack

from course_lib.runner.execute import execute
from course_lib.runner.options import Launch, RunOptions
from course_lib.runner.preflight import (
    LaunchError, check_hosts, check_int, check_mpirun, check_ports, check_script,
    check_strings, check_worker_range, find_horovodrun, horovod_launcher)
from course_lib.runner.runlog import RunResult
from course_lib.runner.slots import PlaceRequest, placed, plan_placement
from course_lib.runner.supervise import SPEC_VAR
from course_lib.training.machine.placement import WORKER_INDEX_ENV

__all__ = ["DISCOVERY_SCRIPT", "LOCAL_HOSTS", "check_worker_range", "check_ports", "free_ports",
           "tf_config", "Elastic", "build_elastic_command", "build_mpirun_command", "run_elastic",
           "run_workers", "run_multiworker", "run_mpirun"]

DISCOVERY_SCRIPT = Path(__file__).resolve().parents[2] / "cluster" / "discover_hosts.sh"
LOCAL_HOSTS = "localhost:1,127.0.0.1:1"  # one machine under two names (Horovod's own tests)


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


@dataclass(frozen=True)
class Elastic:
    """The elastic settings of :func:`run_elastic` (see its arguments), checked."""

    num_workers: int
    min_workers: int
    max_workers: int
    discovery_script: Path
    network_interface: str | None
    cooldown_range: tuple[int, int] | None
    elastic_timeout: int


def build_elastic_command(horovodrun: str | Sequence[str], program: Sequence[str], elastic: Elastic,
                          extra: Sequence[str] = ()) -> list[str]:
    """The elastic ``horovodrun`` argument list (no validation; see :func:`run_elastic`).

    Args:
        horovodrun: A path or an argument list (:func:`~course_lib.runner.preflight.horovod_launcher`).
        program: What each rank runs, ``[python, script, *args]``, behind the rank wrapper when the run is
            placed on this machine (:func:`course_lib.runner.slots.placed`).
        elastic: The elastic settings. extra: More ``horovodrun`` arguments, placed before the program.
    """
    command = [horovodrun] if isinstance(horovodrun, str) else list(horovodrun)
    command += ["-np", str(elastic.num_workers), "--min-np", str(elastic.min_workers),
                "--max-np", str(elastic.max_workers), "--host-discovery-script", str(elastic.discovery_script),
                "--elastic-timeout", str(elastic.elastic_timeout)]
    if elastic.network_interface:
        command += ["--network-interface", elastic.network_interface]
    if elastic.cooldown_range:
        low, high = elastic.cooldown_range
        command += ["--blacklist-cooldown-range", str(low), str(high)]
    return command + list(extra) + list(program)


def build_mpirun_command(program: Sequence[str], *, num_workers: int, hosts: str, as_root: bool) -> list[str]:
    """The Open MPI line of ``cluster/mpirun_horovod.sh`` (tests/test_cluster_files.py checks that both
    agree); ``program`` is ``[python, script, *args]``, behind the rank wrapper when the run is placed."""
    root = ["--allow-run-as-root"] if as_root else []
    return (["mpirun"] + root + ["-np", str(num_workers), "-H", hosts, "-bind-to", "none",
                                 "-map-by", "slot", "--tag-output", "-x", "PATH",
                                 "-x", "LD_LIBRARY_PATH", "-x", "PYTHONUNBUFFERED=1",
                                 "-x", "TF_CPP_MIN_LOG_LEVEL=2", "-mca", "mpi_yield_when_idle",
                                 "1", "-mca", "pml", "ob1", "-mca", "btl", "^openib", *program])


def run_elastic(script: str | os.PathLike[str], script_args: Sequence[str] = (), *,
                num_workers: int = 2, min_workers: int = 1, max_workers: int = 2,
                hosts: str = LOCAL_HOSTS, discovery_script: str | os.PathLike[str] = DISCOVERY_SCRIPT,
                network_interface: str | None = "lo", cooldown_range: tuple[int, int] | None = (1, 2),
                elastic_timeout: int = 60, extra_horovodrun_args: Sequence[str] = (),
                **options: Unpack[RunOptions]) -> RunResult:
    """Run a Horovod Elastic job, live: it starts with ``num_workers`` and keeps going with any
    number between ``min_workers`` and ``max_workers``.

    Args:
        script, script_args: The elastic training script and its arguments.
        num_workers, min_workers, max_workers: Start, lower and upper number of workers.
        hosts: ``host:slots,...`` the discovery script reports (``DISCOVER_HOSTS``).
        discovery_script: Executable that prints ``host:slots`` lines (polled every second).
        network_interface: Interface for Gloo (``"lo"`` on one machine); None: Horovod's choice.
        cooldown_range: ``(low, high)`` seconds before a blacklisted host may return; None: never.
        elastic_timeout: Seconds to wait for ``min_workers`` after a failure.
        extra_horovodrun_args: More ``horovodrun`` arguments, placed before the script.
        **options: As in :func:`course_lib.runner.launch.run_horovod` (``timeout`` defaults to
            300). On this machine the run holds ``max_workers`` slots (the most it can grow to); a
            worker that re-joins gets the share of its host slot.

    Returns:
        The :class:`RunResult` (use :func:`world_sizes` for the sizes the group went through).

    Raises:
        LaunchError: Bad input (min > max, malformed hosts, missing script), before launching.
        RunFailedError, RunTimeoutError, RunStoppedError: As in ``run_horovod``.
    """
    run = Launch.of(options, timeout=300)
    path = check_script(script, run.cwd)
    args = check_strings("script_args", script_args)
    extra = check_strings("extra_horovodrun_args", extra_horovodrun_args)
    check_worker_range(num_workers, min_workers, max_workers, check_hosts(hosts))
    discovery = Path(discovery_script)
    if not discovery.is_file() or not os.access(discovery, os.X_OK):
        raise LaunchError(f"discovery_script {str(discovery)!r} is not an executable file; "
                          f"chmod +x it or use the course's {DISCOVERY_SCRIPT}")
    if cooldown_range is not None:
        low, high = (check_int("cooldown_range[0]", cooldown_range[0]),
                     check_int("cooldown_range[1]", cooldown_range[1]))
        if high < low:
            raise LaunchError(f"cooldown_range={cooldown_range!r} must be (low, high) with low <= high")
    check_int("elastic_timeout", elastic_timeout)
    place = plan_placement(max_workers, hosts=hosts, device=run.device, oversubscribe=run.oversubscribe)
    elastic = Elastic(num_workers, min_workers, max_workers, discovery.resolve(), network_interface,
                      cooldown_range, elastic_timeout)
    command = build_elastic_command(horovod_launcher(run.python, find_horovodrun(run.python)),
                                    placed(place, [run.python, str(path), *args]), elastic, extra)
    env = {"DISCOVER_HOSTS": " ".join(h.strip() for h in hosts.split(",")), **dict(run.env or {})}
    return execute(run.but(env=env, command=command, launcher="horovodrun", place=place, script=path.name))


def run_workers(script: str | os.PathLike[str], script_args: Sequence[str] = (), *,
                worker_envs: Sequence[Mapping[str, str]], **options: Unpack[RunOptions]) -> RunResult:
    """Run ``python script args`` once per entry of ``worker_envs``, as one supervised run.

    Worker ``i`` gets the current environment plus ``env`` plus ``worker_envs[i]``; its lines
    come back tagged as rank ``i``. When one worker fails, the others are ended (a collective
    would otherwise wait for it), and the run's status is the failed worker's.

    Args:
        worker_envs: One mapping of extra variables per worker (at least one).
        script, script_args: As in :func:`course_lib.runner.launch.run_horovod`.
        **options: As in :func:`course_lib.runner.launch.run_horovod`, but ``timeout`` is required
            (a worker may wait forever for a missing peer). The group holds one slot per worker,
            and worker ``i`` runs on share ``i``.

    Returns:
        One :class:`RunResult` for all workers.

    Raises:
        LaunchError: Bad input, before anything is launched.
        RunFailedError, RunTimeoutError, RunStoppedError: As in ``run_horovod``.
    """
    if options.get("timeout") is None:
        raise LaunchError("timeout=None: a worker can wait forever for a missing peer; pass "
                          "timeout= in seconds, e.g. 300")
    run = Launch.of(options)
    path = check_script(script, run.cwd)
    args = check_strings("script_args", script_args)
    if isinstance(worker_envs, Mapping) or not worker_envs:
        raise LaunchError("worker_envs must be a non-empty list of mappings, one per worker")
    place: PlaceRequest | None = plan_placement(len(worker_envs), device=run.device,
                                                oversubscribe=run.oversubscribe)
    specs = []
    for index, extra in enumerate(worker_envs):
        names = check_strings(f"worker_envs[{index}] keys", list(extra))
        values = check_strings(f"worker_envs[{index}] values", list(extra.values()))
        specs.append({"argv": placed(place, [run.python, str(path)] + args),
                      "env": {WORKER_INDEX_ENV: str(index), **dict(zip(names, values))}})
    return execute(run.but(env={**dict(run.env or {}), SPEC_VAR: json.dumps(specs)},
                           command=[run.python, "-m", "course_lib.runner.supervise"],
                           launcher=f"the group of {len(specs)} workers", place=place, script=path.name))


def run_multiworker(script: str | os.PathLike[str], script_args: Sequence[str] = (), *,
                    num_workers: int = 2, ports: Sequence[int] | None = None,
                    **options: Unpack[RunOptions]) -> RunResult:
    """Run a MultiWorkerMirroredStrategy script as ``num_workers`` local processes.

    Each worker gets ``TF_CONFIG`` with the whole cluster (``localhost:port`` each) and its own
    index; ``ports`` default to free ones. ``**options`` as in :func:`run_workers` (``timeout``
    defaults to 300).

    Raises:
        LaunchError: A port in use or repeated, a bad ``num_workers``, or no ``timeout``.
    """
    check_int("num_workers", num_workers)
    ports = free_ports(num_workers) if ports is None else check_ports(list(ports))
    if len(ports) != num_workers:
        raise LaunchError(f"{len(ports)} ports for {num_workers} workers; give one port each")
    envs = [{"TF_CONFIG": tf_config(ports, i)} for i in range(num_workers)]
    options.setdefault("timeout", 300)
    return run_workers(script, script_args, worker_envs=envs, **options)


def run_mpirun(script: str | os.PathLike[str], script_args: Sequence[str] = (), *,
               num_workers: int = 2, hosts: str | None = None,
               **options: Unpack[RunOptions]) -> RunResult:
    """Run a Horovod script under plain Open MPI ``mpirun`` (what ``horovodrun --mpi`` builds).

    Args:
        hosts: ``host:slots,...``; default ``localhost:<num_workers>``.
        script, script_args, num_workers, **options: As in :func:`run_horovod`: on this machine
            the run holds one slot per worker, and rank ``r`` (``OMPI_COMM_WORLD_RANK``) runs on
            share ``r``.

    Raises:
        LaunchError: Bad input or no ``mpirun``, before anything is launched.
    """
    run = Launch.of(options)
    path = check_script(script, run.cwd)
    args = check_strings("script_args", script_args)
    hosts = hosts if hosts is not None else f"localhost:{check_int('num_workers', num_workers)}"
    if num_workers > check_hosts(hosts):
        raise LaunchError(f"num_workers={num_workers} exceeds the slots of hosts={hosts!r}")
    check_mpirun(dict(os.environ) | dict(run.env or {}))
    place = plan_placement(num_workers, hosts=hosts, device=run.device, oversubscribe=run.oversubscribe)
    command = build_mpirun_command(placed(place, [run.python, str(path), *args]), num_workers=num_workers,
                                   hosts=hosts, as_root=os.geteuid() == 0)
    return execute(run.but(command=command, launcher="mpirun", place=place, script=path.name))
