"""One small description per launcher: its name, its rank-prefix line format, and how its command is built.

The engine (:func:`course_lib.runner.run.run`) does the same for every launch: it checks the shared options
and the script, places the workers, holds their slots, streams the lines and returns a ``RunResult``. What
differs from one launcher to the next is written here, once each, as a :class:`Launcher` (its name, its
command, its rank-prefix line format of :data:`LINE_FORMATS`, its own checks): :func:`horovodrun`
(``horovodrun -np N``, options :class:`Horovodrun`), :func:`elastic` (``--min-np/--max-np``, :class:`Elastic`),
:func:`mpirun`, :func:`torchrun`, :func:`python` (one process) and :func:`workers` (several python processes
under the supervisor). A description builds its command from :class:`Ranks` (the interpreter, the worker
count, the rank's program and, when the run is placed on this machine, the rank wrapper in front of it) and
may check its own options first (given the worker count, before anything is placed or started).

Introduced in notebooks/03_horovod.ipynb (horovodrun; notebook 06 the others, notebook 07 torchrun).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from course_lib.runner.preflight import (
    CONTROLLERS, LaunchError, check_hosts, check_int, check_mpirun, check_strings, check_worker_range,
    find_horovodrun, horovod_launcher)
from course_lib.runner.procs.supervise import SPEC_VAR
from course_lib.training.machine.placement import WORKER_INDEX_ENV

__all__ = ["LOCAL_HOSTS", "DISCOVERY_SCRIPT", "LINE_FORMATS", "Ranks", "Command", "Launcher", "Horovodrun", "Elastic",
           "build_horovod_command", "build_elastic_command", "build_mpirun_command", "build_torchrun_command",
           "check_torch", "horovodrun", "elastic", "mpirun", "torchrun", "python", "workers"]

DISCOVERY_SCRIPT = Path(__file__).resolve().parents[2] / "cluster" / "discover_hosts.sh"
LOCAL_HOSTS = "localhost:1,127.0.0.1:1"  # one machine under two names (Horovod's own tests)
#: The rank prefixes of the launchers' lines (parsed by :func:`course_lib.runner.runlog.parse_line`).
LINE_FORMATS = {"gloo": "[1]<stdout>:text", "mpi": "[1,0]<stdout>:text", "torchrun": "[default1]:text",
                "plain": "text (one process: every line is rank 0's)"}


@dataclass(frozen=True)
class Ranks:
    """What a launcher's command is made of, filled in by the engine once the launch is checked and placed.

    Attributes:
        python: The ranks' interpreter. workers: Processes to start (an elastic run: the first ones).
        program: Each rank's ``(script, *args)``. wrapper: The rank wrapper of a placed run, else ``()``.
        env: The run's extra variables (``env=``), for checks that read them (``mpirun`` on its PATH).
    """

    python: str
    workers: int
    program: tuple[str, ...]
    wrapper: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def placed(self) -> list[str]:
        """``[*wrapper, python, script, *args]``: what each rank runs."""
        return [*self.wrapper, self.python, *self.program]


@dataclass(frozen=True)
class Command:
    """A launcher's command: ``argv``, and variables it sets unless the caller's ``env=`` does."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Launcher:
    """One launcher, described.

    Attributes:
        name: What errors call the run (``"horovodrun"``; ``{workers}`` is replaced by the worker count).
        line_format: Its rank prefix, a key of :data:`LINE_FORMATS` (``"plain"``: untagged, one process).
        command: Builds the command from :class:`Ranks` (it may raise ``LaunchError``: a missing tool).
        check: Its own checks, given the worker count, before anything is placed (``None``: none).
        hosts: Where its ranks run (``None``: this machine); other machines' ranks are not placed here.
        ranks: Ranks placed when not one per worker (an elastic run: the most it grows to).
        one_process: One process holding the workers' slots (``python``), not one per worker.
    """

    name: str
    line_format: str
    command: Callable[[Ranks], Command]
    check: Callable[[int], None] | None = None
    hosts: str | None = None
    ranks: int | None = None
    one_process: bool = False


@dataclass(frozen=True)
class Horovodrun:
    """``run_horovod``'s own options.

    Attributes:
        hosts: ``"host:slots[,host:slots...]"``; ``None``: this machine.
        controller: ``"gloo"``, ``"mpi"`` or ``None`` (horovodrun's own choice).
        extra_args: More ``horovodrun`` arguments, placed before the script.
    """

    hosts: str | None = None
    controller: str | None = "gloo"
    extra_args: Sequence[str] = ()


@dataclass(frozen=True)
class Elastic:
    """``run_elastic``'s own options: it starts with ``workers`` and keeps going with ``min_workers`` to
    ``max_workers``; ``hosts`` is what the discovery script (an executable printing ``host:slots`` lines, polled
    every second) reports (``DISCOVER_HOSTS``); ``network_interface`` Gloo's (``"lo"`` on one machine; None:
    Horovod's choice); ``cooldown_range`` the ``(low, high)`` seconds before a blacklisted host may return (None:
    never); ``elastic_timeout`` the seconds to wait for ``min_workers`` after a failure; ``extra_args`` more
    ``horovodrun`` arguments, placed before the script."""

    min_workers: int = 1
    max_workers: int = 2
    hosts: str = LOCAL_HOSTS
    discovery_script: str | os.PathLike[str] = DISCOVERY_SCRIPT
    network_interface: str | None = "lo"
    cooldown_range: tuple[int, int] | None = (1, 2)
    elastic_timeout: int = 60
    extra_args: Sequence[str] = ()


def build_horovod_command(horovodrun: str | Sequence[str], num_workers: int, program: Sequence[str],
                          hosts: str | None, controller: str | None,
                          extra_horovodrun_args: Sequence[str]) -> list[str]:
    """The ``horovodrun`` argument list (no validation): ``[horovodrun, -np, N, (--gloo|--mpi), (-H, hosts),
    *extra, *program]``; ``program`` is what each rank runs (:meth:`Ranks.placed`)."""
    command = [horovodrun] if isinstance(horovodrun, str) else list(horovodrun)
    command += ["-np", str(num_workers)]
    if controller is not None:
        command.append(f"--{controller}")
    if hosts is not None:
        command += ["-H", hosts]
    return command + list(extra_horovodrun_args) + list(program)


def build_elastic_command(horovodrun: str | Sequence[str], num_workers: int, program: Sequence[str],
                          options: Elastic) -> list[str]:
    """The elastic ``horovodrun`` argument list (no validation); ``program`` as in :func:`build_horovod_command`."""
    command = [horovodrun] if isinstance(horovodrun, str) else list(horovodrun)
    command += ["-np", str(num_workers), "--min-np", str(options.min_workers),
                "--max-np", str(options.max_workers), "--host-discovery-script", str(options.discovery_script),
                "--elastic-timeout", str(options.elastic_timeout)]
    if options.network_interface:
        command += ["--network-interface", options.network_interface]
    if options.cooldown_range:
        low, high = options.cooldown_range
        command += ["--blacklist-cooldown-range", str(low), str(high)]
    return command + list(options.extra_args) + list(program)


def build_mpirun_command(program: Sequence[str], *, num_workers: int, hosts: str, as_root: bool) -> list[str]:
    """The Open MPI line of ``cluster/mpirun_horovod.sh`` (tests/test_cluster_files.py checks that both
    agree); ``program`` is ``[python, script, *args]``, behind the rank wrapper when the run is placed."""
    root = ["--allow-run-as-root"] if as_root else []
    return (["mpirun"] + root + ["-np", str(num_workers), "-H", hosts, "-bind-to", "none",
                                 "-map-by", "slot", "--tag-output", "-x", "PATH",
                                 "-x", "LD_LIBRARY_PATH", "-x", "PYTHONUNBUFFERED=1",
                                 "-x", "TF_CPP_MIN_LOG_LEVEL=2", "-mca", "mpi_yield_when_idle",
                                 "1", "-mca", "pml", "ob1", "-mca", "btl", "^openib", *program])


def build_torchrun_command(python: str, num_workers: int, program: Sequence[str], *, log_dir: str,
                           wrapper: Sequence[str] = (), extra: Sequence[str] = ()) -> list[str]:
    """The ``torchrun`` argument list (no validation): ``python`` (with torch) runs torchrun, and the ranks
    ``[script, *args]`` (``program``), behind ``wrapper`` when the run is placed (``--no-python``); ``log_dir`` is
    torchrun's ``--log-dir``, ``extra`` more torchrun arguments (``--max-restarts 1``) before the program."""
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


def horovodrun(options: Horovodrun) -> Launcher:
    """``horovodrun -np N``, started as ``python -m course_lib.runner.horovodrun`` (its build check kept)."""
    if options.controller not in CONTROLLERS:
        raise LaunchError(f"controller={options.controller!r} must be 'gloo', 'mpi' or None")
    extra = check_strings("extra_horovodrun_args", options.extra_args)

    def check(workers: int) -> None:
        if options.hosts is not None:
            total = check_hosts(options.hosts)
            if workers > total:
                raise LaunchError(f"workers={workers} exceeds the {total} slots of hosts={options.hosts!r}; "
                                  "add slots (host:slots) or use fewer workers")

    def command(ranks: Ranks) -> Command:
        launcher = horovod_launcher(ranks.python, find_horovodrun(ranks.python))
        env = {}
        if options.controller == "mpi":
            check_mpirun(dict(os.environ) | dict(ranks.env))
            # Open MPI busy-polls while a rank waits; on a CPU-only machine that steals the cores the
            # other ranks compute on (an epoch measured 25 s instead of 7 s). Yield instead, unless the
            # caller chose otherwise.
            env = {"OMPI_MCA_mpi_yield_when_idle": "1"}
        return Command(build_horovod_command(launcher, ranks.workers, ranks.placed(), options.hosts,
                                             options.controller, extra), env)

    return Launcher("horovodrun", "mpi" if options.controller == "mpi" else "gloo", command, check, options.hosts)


def elastic(options: Elastic) -> Launcher:
    """Horovod Elastic: ``horovodrun --min-np --max-np --host-discovery-script`` (always Gloo); on this machine
    the run holds ``max_workers`` slots, and a worker that re-joins gets the share of its host slot."""
    extra = check_strings("extra_horovodrun_args", options.extra_args)
    discovery = Path(options.discovery_script)

    def check(workers: int) -> None:
        check_worker_range(workers, options.min_workers, options.max_workers, check_hosts(options.hosts))
        if not discovery.is_file() or not os.access(discovery, os.X_OK):
            raise LaunchError(f"discovery_script {str(discovery)!r} is not an executable file; "
                              f"chmod +x it or use the course's {DISCOVERY_SCRIPT}")
        if options.cooldown_range is not None:
            low, high = (check_int("cooldown_range[0]", options.cooldown_range[0]),
                         check_int("cooldown_range[1]", options.cooldown_range[1]))
            if high < low:
                raise LaunchError(f"cooldown_range={options.cooldown_range!r} must be (low, high) with low <= high")
        check_int("elastic_timeout", options.elastic_timeout)

    def command(ranks: Ranks) -> Command:
        launcher = horovod_launcher(ranks.python, find_horovodrun(ranks.python))
        resolved = Elastic(**{**options.__dict__, "discovery_script": discovery.resolve(), "extra_args": extra})
        hosts = " ".join(h.strip() for h in options.hosts.split(","))
        return Command(build_elastic_command(launcher, ranks.workers, ranks.placed(), resolved),
                       {"DISCOVER_HOSTS": hosts})

    return Launcher("horovodrun", "gloo", command, check, options.hosts, ranks=options.max_workers)


def mpirun(hosts: str | None) -> Launcher:
    """Plain Open MPI ``mpirun`` (what ``horovodrun --mpi`` builds); ``hosts`` default ``localhost:<workers>``."""
    def check(workers: int) -> None:
        if hosts is not None and workers > check_hosts(hosts):
            raise LaunchError(f"workers={workers} exceeds the slots of hosts={hosts!r}")

    def command(ranks: Ranks) -> Command:
        check_mpirun(dict(os.environ) | dict(ranks.env))
        return Command(build_mpirun_command(ranks.placed(), num_workers=ranks.workers,
                                            hosts=hosts or f"localhost:{ranks.workers}", as_root=os.geteuid() == 0))

    return Launcher("mpirun", "mpi", command, check, hosts)


def torchrun(extra_args: Sequence[str], log_dir: str) -> Launcher:
    """``python -m torch.distributed.run --standalone --nproc-per-node N --tee 3`` on this machine; its per-rank
    logs go to ``log_dir``. ``OMP_NUM_THREADS`` defaults to 1 (each rank sets its threads from its share)."""
    extra = check_strings("extra_torchrun_args", extra_args)

    def command(ranks: Ranks) -> Command:
        check_torch(ranks.python)
        return Command(build_torchrun_command(ranks.python, ranks.workers, ranks.program, log_dir=log_dir,
                                              wrapper=ranks.wrapper, extra=extra), {"OMP_NUM_THREADS": "1"})

    return Launcher("torchrun", "torchrun", command)


def python() -> Launcher:
    """One ``python script`` process; it holds the workers' slots (a baseline beside N workers holds N)."""
    return Launcher("python", "plain", lambda ranks: Command(ranks.placed()), one_process=True)


def workers(worker_envs: Sequence[Mapping[str, str]]) -> Launcher:
    """Several ``python`` processes, worker ``i`` with ``worker_envs[i]``, under the supervisor
    (:mod:`course_lib.runner.procs.supervise`), which tags their lines like Horovod's Gloo launcher."""
    if isinstance(worker_envs, Mapping) or not worker_envs:
        raise LaunchError("worker_envs must be a non-empty list of mappings, one per worker")
    envs = []
    for index, extra in enumerate(worker_envs):
        names = check_strings(f"worker_envs[{index}] keys", list(extra))
        values = check_strings(f"worker_envs[{index}] values", list(extra.values()))
        envs.append({WORKER_INDEX_ENV: str(index), **dict(zip(names, values))})

    def check(count: int) -> None:
        if count != len(envs):
            raise LaunchError(f"workers={count} but {len(envs)} worker_envs; give one environment per worker")

    def command(ranks: Ranks) -> Command:
        specs = [{"argv": ranks.placed(), "env": env} for env in envs]
        return Command([ranks.python, "-m", "course_lib.runner.procs.supervise"], {SPEC_VAR: json.dumps(specs)})

    return Launcher("the group of {workers} workers", "gloo", command, check)
