"""What this machine has (CPU cores, NVIDIA GPUs) and the choices that depend on it.

This module only reads the machine: the core ids this process may use, the GPUs ``nvidia-smi`` lists,
and the shares that follow from counts (:func:`cores_per_worker`, :func:`gpu_for_rank`). What the machine
can run at once and the lessons' plans are :mod:`course_lib.training.machine.capacity`; configuring TensorFlow's
devices is :mod:`course_lib.training.devices`; placing a worker on its cores or GPU is
:mod:`course_lib.training.machine.placement`. Nothing here imports TensorFlow.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

__all__ = ["cpu_cores", "cpu_core_ids", "gpu_names", "gpu_count", "cores_per_worker", "gpu_for_rank", "machine_line",
           "span"]

_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.+?)\s*(?:\(UUID:.*\))?\s*$")


def cpu_core_ids() -> tuple[int, ...]:
    """The ids of the CPU cores this process may run on (its affinity mask: a container's cpuset, a
    ``taskset`` or a launcher's grant is respected), ascending; ``0 .. os.cpu_count()-1`` where the
    system has no affinity call (macOS)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(max(1, os.cpu_count() or 1)))


def cpu_cores() -> int:
    """CPU cores this process may run on (affinity mask, else ``os.cpu_count()``)."""
    return max(1, len(cpu_core_ids()))


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


def gpu_count() -> int:
    """Number of physical NVIDIA GPUs on this machine (:func:`gpu_names`, so ``nvidia-smi -L``).

    The launcher asks it to choose a run's device (:mod:`course_lib.runner.slots`).
    Introduced in notebooks/03_horovod.ipynb.
    """
    return len(gpu_names())


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


def machine_line(gpus: list[str] | None = None, cores: int | None = None) -> str:
    """One line stating this machine's shape, starting ``on this machine:`` (nbval masks such lines).

    Args:
        gpus: GPU names; ``None`` asks :func:`gpu_names`.
        cores: CPU cores; ``None`` uses :func:`cpu_cores`.

    Returns:
        e.g. ``"on this machine: 2 CPU cores, no GPU"`` or ``"on this machine: 16 CPU cores, 2 GPUs (NVIDIA H100 ...)"``.
    """
    gpus = gpu_names() if gpus is None else gpus
    cores = cpu_cores() if cores is None else cores
    if not gpus:
        return f"on this machine: {cores} CPU core{'s' if cores != 1 else ''}, no GPU"
    names = ", ".join(sorted(set(gpus)))
    return f"on this machine: {cores} CPU cores, {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({names})"


def span(ids: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5)`` -> ``"0-2,5"``: core ids in the notation of ``taskset`` and ``Cpus_allowed_list``."""
    parts, start = [], None
    for k, value in enumerate(ids):
        if start is None:
            start = value
        if k + 1 == len(ids) or ids[k + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}-{value}")
            start = None
    return ",".join(parts)
