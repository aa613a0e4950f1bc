"""Where a worker runs: its own cores or GPU, granted by the launcher or claimed by the worker itself.

Horovod's ``local_rank`` numbers the ranks of one host NAME. When all the ranks of a machine share one
name, "local rank i takes GPU i / the i-th share of the cores" is the classic idiom (notebook 03). It
fails in two common cases: two runs on one machine (two learners, two notebooks) both have a local
rank 0, and so do two "hosts" that are one machine (``-H localhost:1,127.0.0.1:1``, containers on a
workstation): they pile onto the same core or GPU (notebook 06 shows it). So the course places workers
by what the machine has free, not by their rank:

* **A grant** (:data:`PLACEMENT_ENV`): the launcher (:mod:`course_lib.runner.launch`) holds concrete
  cores or GPUs for the whole run (:mod:`course_lib.training.machine.slot_files`, disjoint from every other
  run's), cuts them into one :class:`Share` per rank, and starts each rank through a small wrapper
  (:mod:`course_lib.runner.place_rank`) that confines it to its share before the script starts
  (``sched_setaffinity``; ``CUDA_VISIBLE_DEVICES`` on GPU hosts) and tells the script in
  :data:`GRANT_ENV`.
* **No grant** (a ``horovodrun`` typed in a terminal, a cluster job): a rank claims free cores (or one
  free GPU) from the same machine-wide slot files for its life, so neither co-located hosts nor two
  runs ever confine two ranks to one core; with nothing free it stays unpinned and says so.

Scripts read their share with :func:`worker_share` (the one channel for "which cores, how many
threads"). Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from course_lib.training.machine import slot_files
from course_lib.training.machine.hardware import cores_per_worker, cpu_core_ids, span

__all__ = ["PLACEMENT_ENV", "GRANT_ENV", "WORKER_INDEX_ENV", "SHARD_ENV", "shard_from_env", "PlacementError", "Share", "Placement",
           "cut_shares", "rank_index", "parse_cores", "WorkerShare", "worker_share", "set_affinity", "describe"]

#: The run's shares (JSON), set by the launcher, read by the rank wrapper (never by a script).
PLACEMENT_ENV = "COURSE_PLACEMENT"
#: This rank's share, set by the rank wrapper: ``cpus=2,3;gpus=;of=0-3`` (``of``: the cores before).
GRANT_ENV = "COURSE_GRANT"
#: Which share a process of ``run_workers`` takes (Horovod ranks use their rank variables instead).
WORKER_INDEX_ENV = "COURSE_WORKER_INDEX"
#: The training-set shard of one copy of a bound run (:func:`course_lib.runner.multiworker.run_bound`): ``"i/N"``.
SHARD_ENV = "COURSE_SHARD"
# PMIX_RANK / SLURM_PROCID: a task that `srun --mpi=pmix` started (cluster/slurm_horovod.sbatch) is a launched rank.
_RANK_VARS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK")
_claims: list[int] = []  # lock fds this process holds for its whole life (claimed cores or GPU)


class PlacementError(ValueError):
    """A placement that cannot be applied (a malformed grant, a GPU wanted twice)."""


@dataclass(frozen=True)
class Share:
    """One rank's resources: core ids and GPU indices (either may be empty)."""

    cpus: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class Placement:
    """A run's shares, in rank order, and how a rank finds its own.

    Attributes:
        shares: One :class:`Share` per rank slot (rank ``r`` takes ``shares[r % len(shares)]``).
        hosts: ``(name, slots)`` of the host list, in order: a Gloo or elastic rank's slot is the
            offset of its host name plus its local rank, which stays the same when elastic re-ranks.
        hide_gpus: Set ``CUDA_VISIBLE_DEVICES=""`` for CPU ranks on a GPU machine.
    """

    shares: tuple[Share, ...]
    hosts: tuple[tuple[str, int], ...] = ()
    hide_gpus: bool = False

    def to_env(self) -> str:
        """The JSON text for :data:`PLACEMENT_ENV`."""
        return json.dumps({"shares": [[list(s.cpus), list(s.gpus)] for s in self.shares],
                           "hosts": [list(h) for h in self.hosts], "hide_gpus": self.hide_gpus})

    @classmethod
    def from_env(cls, text: str) -> "Placement":
        """Parse :meth:`to_env`'s text. Raises :class:`PlacementError` naming what is wrong."""
        try:
            data = json.loads(text)
            shares = tuple(Share(tuple(int(c) for c in cpus), tuple(int(g) for g in gpus))
                           for cpus, gpus in data["shares"])
            hosts = tuple((str(name), int(slots)) for name, slots in data.get("hosts", []))
            if not shares:
                raise ValueError("no share")
            return cls(shares, hosts, bool(data.get("hide_gpus", False)))
        except (ValueError, TypeError, KeyError) as exc:
            raise PlacementError(f"{PLACEMENT_ENV}={text!r} is not a placement ({exc}); it is set by "
                                 "course_lib.runner.launch: unset it") from None


def cut_shares(kind: str, resources: Sequence[int], workers: int) -> tuple[Share, ...]:
    """Cut a grant's cores or GPUs into ``workers`` shares.

    Each worker gets ``len(resources) // workers`` consecutive cores or GPUs (at least one). Cores wrap
    round when there are more workers than cores (an oversubscribed run); GPUs never do: two workers
    on one GPU is what NCCL refuses (horovod#3929).

    Raises:
        PlacementError: More GPU workers than GPUs, or no resources.
    """
    if not resources or workers < 1:
        raise PlacementError(f"cannot cut {list(resources)} into {workers} shares")
    if kind == "gpu":
        if workers > len(resources):
            raise PlacementError(f"{workers} workers for {len(resources)} GPU(s): NCCL refuses two "
                                 "ranks on one GPU (horovod#3929); use device='cpu' or fewer workers")
    each = max(1, len(resources) // workers)
    if kind == "gpu":
        return tuple(Share(gpus=tuple(resources[i * each:(i + 1) * each])) for i in range(workers))
    return tuple(Share(cpus=tuple(resources[(i * each + k) % len(resources)] for k in range(each)))
                 for i in range(workers))


def rank_index(env: Mapping[str, str], hosts: Sequence[tuple[str, int]] = ()) -> int:
    """Which share a rank takes, from the variables its launcher set.

    Horovod's Gloo launcher (and elastic) sets ``HOROVOD_HOSTNAME`` and ``HOROVOD_LOCAL_RANK``: the
    slot is the host's offset in ``hosts`` plus the local rank (stable when elastic re-ranks). Else
    the world rank (``HOROVOD_RANK``, Open MPI's ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, ``PMIX_RANK``,
    Slurm's ``SLURM_PROCID``, torchrun's ``LOCAL_RANK``: notebook 07), else
    :data:`WORKER_INDEX_ENV`, else 0.
    """
    name, local = env.get("HOROVOD_HOSTNAME"), env.get("HOROVOD_LOCAL_RANK")
    if name is not None and local is not None and local.isdigit() and hosts:
        offset = 0
        for host, slots in hosts:
            if host == name:
                return offset + int(local)
            offset += slots
    for var in (*_RANK_VARS, WORKER_INDEX_ENV):
        if env.get(var, "").isdigit():
            return int(env[var])
    return 0


def shard_from_env(env: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """``(index, count)`` of :data:`SHARD_ENV` (``"1/2"`` -> ``(1, 2)``), or ``None`` when it is not set.

    A copy of a bound run is a one-worker process that trains only its shard of the training set (every
    ``count``-th example from ``index``), as rank ``index`` of ``count`` workers would: the course's data loaders
    (:func:`course_lib.training.data.load_arrays`, :func:`course_lib.training.idx_arrays.load_idx_arrays`) apply it.

    Raises:
        PlacementError: A value that is not ``index/count`` with ``0 <= index < count``.

    Introduced in notebooks/02_mirrored_strategy.ipynb.
    """
    text = (os.environ if env is None else env).get(SHARD_ENV, "")
    if not text:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise PlacementError(f"{SHARD_ENV}={text!r}: expected index/count with 0 <= index < count, e.g. 1/2 "
                             "(course_lib.runner.multiworker.run_bound sets it; unset it to train on every example)")
    return int(index), int(count)


def parse_cores(text: str) -> tuple[int, ...]:
    """``"0-2,5"`` -> ``(0, 1, 2, 5)`` (``Cpus_allowed_list`` notation; ``""`` -> ``()``)."""
    cores: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cores.extend(range(int(low), int(high or low) + 1))
    return tuple(cores)


def set_affinity(cores: Sequence[int]) -> None:
    """Move every thread of this process (Horovod's and TensorFlow's included) onto ``cores``."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), list(cores))
        except OSError:  # the thread ended meanwhile
            pass


@dataclass(frozen=True)
class WorkerShare:
    """What :func:`worker_share` decided for this worker.

    Attributes:
        cpus: The cores it is pinned to (``()``: not pinned). gpu_index: Which of the GPUs this
        process sees it uses. threads: Its intra-op threads. source: ``"grant"`` (the launcher's),
        ``"claimed"`` (free cores it took itself), or why it is not pinned.
    """

    cpus: tuple[int, ...]
    gpu_index: int
    threads: int
    source: str


def worker_share(local_rank: int, local_size: int, *, gpus: int = 0, threads: int | None = None,
                 pin: bool = True, env: Mapping[str, str] | None = None) -> WorkerShare:
    """Decide, and apply, this worker's cores and GPU; call right after ``hvd.init()``.

    Args:
        local_rank, local_size: ``hvd.local_rank()``, ``hvd.local_size()`` (used only without a grant
            and without free slots: the classic idiom).
        gpus: GPUs this process sees (``len(tf.config.list_physical_devices("GPU"))``).
        threads: Intra-op threads asked for (``--threads-per-worker``); ``None``: the share's cores.
        pin: ``False`` is the unpinned control (``--no-pin-cores``): a granted process is given back
            the cores it had before the grant.
        env: The environment (default ``os.environ``).

    Returns:
        A :class:`WorkerShare`; on CPU hosts the process is already on ``cpus`` when it returns.

    Introduced in notebooks/03_horovod.ipynb.
    """
    env = os.environ if env is None else env
    grant = env.get(GRANT_ENV)
    if grant:
        fields = dict(part.partition("=")[::2] for part in grant.split(";"))
        cpus, before = parse_cores(fields.get("cpus", "")), parse_cores(fields.get("of", ""))
        if gpus:
            return WorkerShare((), 0, threads or 1, "grant")  # CUDA_VISIBLE_DEVICES names our GPU
        if not pin and hasattr(os, "sched_setaffinity") and before:
            set_affinity(before)
            return WorkerShare((), 0, threads or len(cpus) or 1, "not pinned (--no-pin-cores)")
        if cpus and hasattr(os, "sched_setaffinity"):
            set_affinity(cpus)  # the wrapper confined the main thread; threads started since follow too
        return WorkerShare(cpus, 0, threads or len(cpus) or 1, "grant")
    under_launcher = any(var in env for var in _RANK_VARS)
    if gpus:
        physical = _physical_gpus(env, gpus)  # slot files name GPUs as nvidia-smi numbers them
        claimed = _claim("gpu", physical, 1) if under_launcher else ()
        if claimed:
            return WorkerShare((), physical.index(claimed[0]), threads or 1, "claimed")
        why = "no free GPU slot" if under_launcher else "one process, not started by a launcher"
        return WorkerShare((), local_rank % gpus, threads or 1, f"local rank ({why})")
    wanted = threads or cores_per_worker(local_size)
    if not pin or not under_launcher or not hasattr(os, "sched_setaffinity"):
        why = "--no-pin-cores" if not pin else "one process, not started by a launcher"
        return WorkerShare((), 0, wanted, f"not pinned ({why})")
    claimed = _claim("cpu", cpu_core_ids(), wanted)
    if not claimed:
        return WorkerShare((), 0, wanted, "not pinned (every core is held by other runs)")
    set_affinity(claimed)
    return WorkerShare(claimed, 0, threads or len(claimed), "claimed")


def _physical_gpus(env: Mapping[str, str], visible: int) -> tuple[int, ...]:
    """The nvidia-smi indices of the ``visible`` GPUs this process sees (``$CUDA_VISIBLE_DEVICES`` order)."""
    listed = [part.strip() for part in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    if len(listed) >= visible and all(part.isdigit() for part in listed):
        return tuple(int(part) for part in listed[:visible])
    return tuple(range(visible))  # unset, or named by UUID: the visible order


def _claim(kind: str, resources: Sequence[int], count: int) -> tuple[int, ...]:
    """Lock up to ``count`` free slot files among ``resources`` for this process's whole life."""
    try:
        folder = slot_files.slots_dir()
    except OSError:
        return ()
    got: list[int] = []
    info = {"user": os.environ.get("USER", "?"), "pid": os.getpid(), "script": "claimed by a rank",
            "workers": 1, "started": time.time(), "timeout_s": None}
    for resource in resources:
        if len(got) == count:
            break
        try:
            fd = slot_files.open_lock(slot_files.lock_path(folder, kind, resource))
        except OSError:
            continue
        if slot_files.try_lock(fd):
            slot_files.write_holder(fd, info)
            _claims.append(fd)  # kept open: the lock lasts as long as this process
            got.append(resource)
        else:
            os.close(fd)
    return tuple(got)


def describe(share: WorkerShare) -> str:
    """e.g. ``"cores 2-3 (grant), 2 threads"`` for a script's config line."""
    where = f"cores {span(share.cpus)}" if share.cpus else "all cores"
    return f"{where} ({share.source}), {share.threads} thread{'s' if share.threads != 1 else ''}"
