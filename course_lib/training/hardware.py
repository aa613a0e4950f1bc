"""What this machine has (CPU cores, NVIDIA GPUs) and the choices that depend on it.

Every machine-dependent decision of the course is a pure function of two counts, ``gpus`` and
``cores``, so that it can be tested for any machine shape (tests/test_devices.py runs 1, 2, 4 and 16
cores with 0, 1, 2 and 8 GPUs): how many Horovod workers a lesson starts (:func:`plan_workers`), how many
CPU threads each gets (:func:`cores_per_worker`), and the best efficiency such a run can show
(:attr:`WorkerPlan.ideal_efficiency`). Nothing here imports TensorFlow; configuring TensorFlow's devices
is :mod:`course_lib.training.devices`.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["cpu_cores", "gpu_names", "cores_per_worker", "gpu_for_rank", "mirrored_layout", "WorkerPlan",
           "plan_workers", "machine_line"]

_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.+?)\s*(?:\(UUID:.*\))?\s*$")


def cpu_cores() -> int:
    """CPU cores this process may run on (affinity mask, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def gpu_names(*, timeout_s: float = 10.0) -> list[str]:
    """Names of the physical NVIDIA GPUs, from ``nvidia-smi -L`` (TensorFlow is not imported).

    Args:
        timeout_s: Give up on ``nvidia-smi`` after this many seconds.

    Returns:
        e.g. ``["NVIDIA H100 80GB HBM3"]``, in GPU index order; ``[]`` when ``nvidia-smi`` is
        missing, fails or times out.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        proc = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if proc.returncode != 0:
        return []
    found = []
    for line in proc.stdout.splitlines():
        match = _GPU_LINE.match(line.strip())
        if match:
            found.append((int(match.group(1)), match.group(2)))
    return [name for _, name in sorted(found)]


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def cores_per_worker(local_size: int, cores: int | None = None) -> int:
    """CPU threads each of ``local_size`` workers on one host gets: ``max(1, cores // local_size)``.

    Args:
        local_size: Workers on this host (``hvd.local_size()``), >= 1.
        cores: The host's cores; ``None`` uses :func:`cpu_cores`.

    Returns:
        The share of the cores, at least 1.

    Raises:
        ValueError: ``local_size`` or ``cores`` is not an int >= 1.
    """
    _count("local_size", local_size, 1)
    cores = cpu_cores() if cores is None else _count("cores", cores, 1)
    return max(1, cores // local_size)


def gpu_for_rank(local_rank: int, gpus: int) -> int:
    """The GPU index a Horovod worker pins: ``local_rank % gpus`` (more workers than GPUs share them).

    Raises:
        ValueError: ``local_rank < 0`` or ``gpus < 1``.
    """
    return _count("local_rank", local_rank, 0) % _count("gpus", gpus, 1)


def mirrored_layout(replicas: int, gpus: int) -> tuple[str, bool, float]:
    """Where notebook 02's MirroredStrategy puts ``replicas`` replicas on a machine with ``gpus`` GPUs.

    Args:
        replicas: Replicas wanted, >= 1.
        gpus: Physical GPUs, >= 0.

    Returns:
        ``(kind, simulated, ideal_efficiency)``: ``("gpu", False, 1.0)`` when there is a GPU per replica;
        otherwise the replicas are simulated on one chip (GPU 0 split, or the CPU split) and share it,
        so the best weak-scaling efficiency is ``1 / replicas``.

    Raises:
        ValueError: ``replicas < 1`` or ``gpus < 0``.
    """
    _count("replicas", replicas, 1)
    _count("gpus", gpus, 0)
    if gpus >= replicas:
        return "gpu", False, 1.0
    return ("gpu" if gpus else "cpu"), replicas > 1, 1.0 / replicas


def machine_line(gpus: list[str] | None = None, cores: int | None = None) -> str:
    """One line stating this machine's shape, starting ``machine:`` (nbval masks such lines).

    Args:
        gpus: GPU names; ``None`` asks :func:`gpu_names`.
        cores: CPU cores; ``None`` uses :func:`cpu_cores`.

    Returns:
        e.g. ``"machine: 2 CPU cores, no GPU"`` or ``"machine: 16 CPU cores, 2 GPUs (NVIDIA H100 ...)"``.
    """
    gpus = gpu_names() if gpus is None else gpus
    cores = cpu_cores() if cores is None else cores
    if not gpus:
        return f"machine: {cores} CPU core{'s' if cores != 1 else ''}, no GPU"
    names = ", ".join(sorted(set(gpus)))
    return f"machine: {cores} CPU cores, {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({names})"


@dataclass(frozen=True)
class WorkerPlan:
    """How many Horovod workers a lesson starts on this machine, and what that means.

    Attributes:
        workers: Processes of the lesson's multi-worker runs (its 1-worker runs are the baseline).
        gpus: Physical GPUs found.
        cpu_cores: CPU cores this process may use.
        share_gpu: More workers than GPUs: they share GPUs (each with memory growth), so the
            run shows the code working, not a speed-up.
        oversubscribe: More workers than the launcher's slots (GPUs, else cores); pass it to
            ``run_horovod(..., oversubscribe=...)``.
        full_data: Train on the full data set (GPUs) rather than a CPU-sized subset.
        text: One plain sentence for the learner (it names this machine's counts: print it on a
            ``machine:`` line).
        ideal_efficiency: The best weak-scaling efficiency the multi-worker run can show here,
            ``min(workers, slots) / workers``: 1.0 when every worker has its own GPU or core, 0.5 when
            2 workers take turns on one core or one GPU.
    """

    workers: int
    gpus: int
    cpu_cores: int
    share_gpu: bool
    oversubscribe: bool
    full_data: bool
    text: str
    ideal_efficiency: float = 1.0


def plan_workers(gpus: int | None = None, cores: int | None = None, *, at_least: int = 2,
                 at_most: int = 8) -> WorkerPlan:
    """Decide how many Horovod workers a lesson runs: one per GPU, at least ``at_least``.

    - 0 GPUs: ``at_least`` CPU processes (one thread each); oversubscribed when the machine has
      fewer cores than that.
    - 1 GPU (the most common learner set-up): ``at_least`` workers share the one GPU, each with
      memory growth: the code and its output are those of a multi-GPU run, its timing is not.
    - N >= 2 GPUs: one worker per GPU, up to ``at_most``.

    Args:
        gpus: Physical GPUs; ``None`` asks ``nvidia-smi`` (:func:`gpu_names`).
        cores: CPU cores; ``None`` uses :func:`cpu_cores`.
        at_least: Fewest workers of a multi-worker run (>= 2: one worker is not data parallel).
        at_most: Most workers (>= ``at_least``).

    Returns:
        A :class:`WorkerPlan`.

    Raises:
        ValueError: Negative counts, ``at_least < 2`` or ``at_most < at_least``.

    Introduced in notebooks/03_horovod.ipynb.
    """
    gpus = len(gpu_names()) if gpus is None else gpus
    cores = cpu_cores() if cores is None else cores
    for name, value in (("gpus", gpus), ("cores", cores)):
        _count(name, value, 0)
    if isinstance(at_least, bool) or not isinstance(at_least, int) or at_least < 2:
        raise ValueError(f"at_least must be an int >= 2 (one worker is not data parallel), got {at_least!r}")
    if not isinstance(at_most, int) or at_most < at_least:
        raise ValueError(f"at_most must be an int >= at_least={at_least}, got {at_most!r}")
    cores = max(1, cores)
    workers = min(max(at_least, gpus), at_most)
    slots = gpus or cores
    share_gpu = 0 < gpus < workers
    if gpus == 0:
        text = (f"No GPU: {workers} workers run as CPU processes with one thread each "
                f"on this machine's {cores} core{'s' if cores != 1 else ''}"
                + (" (more workers than cores: they take turns, so timings are pessimistic)."
                   if workers > cores else "."))
    elif share_gpu:
        text = (f"{gpus} GPU{'s' if gpus != 1 else ''}: {workers} workers share "
                f"{'it' if gpus == 1 else 'them'} (each with memory growth), so the runs show the "
                "code and its output exactly as on more GPUs, but not a speed-up: "
                "the workers take turns on the same chip.")
    else:
        text = f"{gpus} GPUs: {workers} workers, one per GPU."
    return WorkerPlan(workers, gpus, cores, share_gpu, workers > slots, gpus > 0, text,
                      min(workers, slots) / workers)
