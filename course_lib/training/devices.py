"""TensorFlow's devices: simulated devices, per-worker pinning, and what is real or simulated.

On a machine with one GPU (or none) the course still shows data parallelism by splitting the
GPU into virtual GPUs or the CPU into logical CPUs. TensorFlow only accepts that split before it
initialises its devices, so :func:`simulate_devices` must run before anything else uses
TensorFlow; importing this module does not import TensorFlow.

This module is also the learner's ONE import for machine facts in the notebooks: ``devices.gpu_names``,
``devices.machine_line``, ``devices.plan_workers`` and ``devices.mirrored_layout`` are the names the
notebooks call, handed on from their homes in :mod:`course_lib.training.machine` (``hardware``: what the
machine has; ``capacity``: what it can run and the lessons' plans) so that a notebook's Setup imports one
module. That is the whole list (:data:`NOTEBOOK_MACHINE_FACTS`; ``tests/test_devices.py`` derives it from
the notebooks); nothing else re-exports them, and code outside the notebooks imports each name from its home.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from course_lib.training.machine.capacity import mirrored_layout, plan_workers
from course_lib.training.machine.hardware import cpu_cores, gpu_names, machine_line
from course_lib.training.machine.placement import set_affinity, worker_share

#: The machine facts the notebooks call through this module (their homes: course_lib.training.machine).
NOTEBOOK_MACHINE_FACTS = ("gpu_names", "machine_line", "plan_workers", "mirrored_layout")

__all__ = [
    "DeviceError",
    "DevicesAlreadyInitializedError",
    "DeviceReport",
    "set_cpu_threads",
    "pin_cpu_cores",
    "simulate_devices",
    "describe",
    "configure_worker",
    "NOTEBOOK_MACHINE_FACTS",
    # NOTEBOOK_MACHINE_FACTS, handed on from course_lib.training.machine:
    "gpu_names",
    "machine_line",
    "plan_workers",
    "mirrored_layout",
]

_RESTART_HINT = ("restart the kernel (Kernel ▸ Restart) and call simulate_devices before anything "
                 "else uses TensorFlow")

# (kind, names, memory_limit_mb) of the last successful simulate_devices call in this process.
_simulated: tuple[str, list[str], int | None] | None = None


class DeviceError(RuntimeError):
    """A device could not be configured as asked."""


class DevicesAlreadyInitializedError(DeviceError):
    """TensorFlow already initialised its devices; they can no longer be split or pinned."""


def _check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1 (the number of devices to simulate), got {n!r}")
    return n


def simulate_devices(n: int, *, memory_limit_mb: int = 1024) -> list[str]:
    """Split GPU 0 into ``n`` virtual GPUs, or (without GPU) the CPU into ``n`` logical CPUs.

    Must run before TensorFlow initialises its devices (before any tensor, model or
    ``list_logical_devices``). Calling it again with the same ``n`` after success is a no-op.

    Args:
        n: Number of devices.
        memory_limit_mb: Memory of each virtual GPU (ignored on CPU).

    Returns:
        Device names for ``tf.distribute.MirroredStrategy``: ``["/gpu:0", ...]`` or
        ``["/cpu:0", ...]``.

    Raises:
        ValueError: ``n`` is not an int >= 1, or ``memory_limit_mb < 1``.
        DevicesAlreadyInitializedError: TensorFlow already initialised its devices with a
            different layout.
    """
    global _simulated
    n = _check_n(n)
    if not isinstance(memory_limit_mb, int) or memory_limit_mb < 1:
        raise ValueError(f"memory_limit_mb must be an int >= 1, got {memory_limit_mb!r}")
    if _simulated is not None and len(_simulated[1]) == n:
        return list(_simulated[1])

    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        kind, physical = "gpu", gpus[0]
        config = [tf.config.LogicalDeviceConfiguration(memory_limit=memory_limit_mb)
                  for _ in range(n)]
    else:
        kind, physical = "cpu", tf.config.list_physical_devices("CPU")[0]
        config = [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
    names = [f"/{kind}:{i}" for i in range(n)]
    try:
        tf.config.set_logical_device_configuration(physical, config)
    except RuntimeError as exc:
        current = tf.config.list_logical_devices(kind.upper())
        if len(current) == n:  # already exactly this layout (e.g. n=1 untouched)
            _simulated = (kind, names, memory_limit_mb if kind == "gpu" else None)
            return list(names)
        raise DevicesAlreadyInitializedError(
            f"TensorFlow already initialised its devices ({len(current)} {kind.upper()} device(s)); "
            f"cannot simulate {n}: {_RESTART_HINT}."
        ) from exc
    _simulated = (kind, names, memory_limit_mb if kind == "gpu" else None)
    return list(names)


@dataclass
class DeviceReport:
    """What is real and what is simulated on this machine."""

    physical_gpus: list[str]
    cpu_cores: int
    logical_devices: list[str] = field(default_factory=list)
    simulated: bool = False
    memory_limit_mb: int | None = None

    def text(self, prefix: str = "") -> str:
        """A plain multi-line statement of the hardware, real and simulated.

        Args:
            prefix: Put in front of every line; notebooks pass ``"on this machine: "`` so that nbval masks
                these machine-dependent lines (tests/notebooks/sanitize.cfg).
        """
        n = len(self.logical_devices)
        lines = []
        if not self.physical_gpus:
            lines.append(f"No GPU found: this is a CPU-only machine with {self.cpu_cores} cores.")
            if self.simulated:
                lines.append(f"The course simulates {n} devices by splitting the CPU "
                             f"({', '.join(self.logical_devices)}); timings show how the code "
                             "scales, not how GPUs would.")
            else:
                lines.append("TensorFlow uses the CPU as one device (/cpu:0).")
        else:
            count = len(self.physical_gpus)
            listing = "; ".join(f"GPU {i}: {name}" for i, name in enumerate(self.physical_gpus))
            lines.append(f"{count} physical GPU{'s' if count > 1 else ''} ({listing}) and "
                         f"{self.cpu_cores} CPU cores.")
            if self.simulated:
                memory = f" of {self.memory_limit_mb} MiB each" if self.memory_limit_mb else ""
                lines.append(f"The course simulates {n} devices by splitting GPU 0 into {n} virtual "
                             f"GPUs{memory}; they share one chip, so timings show how the code "
                             f"scales, not how {n} real GPUs would.")
            else:
                lines.append("All devices are real: nothing is simulated.")
        return "\n".join(prefix + line for line in lines)


def describe() -> DeviceReport:
    """Report the physical hardware and the devices the course uses, without starting TensorFlow.

    ``logical_devices`` are the names returned by :func:`simulate_devices` when it ran in this
    process, else the devices TensorFlow uses by default (``/cpu:0`` and one ``/gpu:i`` per GPU
    that ``nvidia-smi`` lists).

    Returns:
        A :class:`DeviceReport`; ``report.text()`` is the human statement.
    """
    gpus = gpu_names()
    if _simulated is not None:
        kind, names, memory = _simulated
        return DeviceReport(gpus, cpu_cores(), list(names), True, memory)
    logical = ["/cpu:0"] + [f"/gpu:{i}" for i in range(len(gpus))]
    return DeviceReport(gpus, cpu_cores(), logical, False, None)


def set_cpu_threads(threads: int) -> None:
    """Give this process ``threads`` intra-op threads and one inter-op thread (CPU workers).

    Keras runs one step's ops in sequence, and Horovod's all-reduce is asynchronous and needs no
    inter-op thread of its own. Call before TensorFlow initialises its devices.

    Args:
        threads: Intra-op threads, >= 1.
    """
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def pin_cpu_cores(local_rank: int, threads: int) -> list[int]:
    """The classic idiom: keep CPU worker ``local_rank`` on the ``local_rank``-th share of ``threads`` cores.

    The cores this process may use (``os.sched_getaffinity``, so a binding by mpirun, taskset or a
    container's cpuset is respected) are cut into consecutive shares of ``threads``; local rank ``r``
    gets share ``r`` (wrapping round when the host's workers need more cores than it has, as an
    oversubscribed run does). Every thread of the process is moved, Horovod's background thread
    included, and threads started later inherit the cores. On the course's 2-core machine, two
    workers pinned this way got through more images per second than unpinned ones in every round of
    ``make bench`` section 1h (benchmarks/README.md). It is right only when every rank of the machine
    shares one host name and no other run uses the machine: the course's scripts call
    :func:`course_lib.training.machine.placement.worker_share` instead (the launcher's grant, else free cores).
    Introduced in notebooks/03_horovod.ipynb.

    Args:
        local_rank: ``hvd.local_rank()``.
        threads: This worker's intra-op threads (:func:`set_cpu_threads`), >= 1.

    Returns:
        The cores this process now runs on; ``[]`` where the system has no CPU affinity call (macOS):
        nothing was changed there.

    Raises:
        ValueError: ``local_rank < 0`` or ``threads < 1``.
    """
    if isinstance(local_rank, bool) or not isinstance(local_rank, int) or local_rank < 0:
        raise ValueError(f"local_rank must be an int >= 0, got {local_rank!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    if not hasattr(os, "sched_setaffinity"):
        return []
    allowed = sorted(os.sched_getaffinity(0))
    share = local_rank % max(1, len(allowed) // threads)
    cores = allowed[share * threads:(share + 1) * threads]
    set_affinity(cores)
    return cores


def configure_worker(local_rank: int, *, threads_per_worker: int | None = None,
                     local_size: int = 1, pin: bool = True) -> str:
    """Give one worker its own device; call before TensorFlow initialises devices.

    Which GPU or cores is :func:`course_lib.training.machine.placement.worker_share`'s decision (the
    launcher's grant, else a free GPU or free cores, else the local rank). With GPUs: only that GPU is
    made visible (with memory growth), so inside this process it is ``/gpu:0``. Without GPUs:
    intra-op threads = ``threads_per_worker`` (default: the share's cores) and inter-op threads = 1
    (Keras runs one step's ops in sequence; Horovod's allreduce is asynchronous and needs no inter-op
    thread of its own).

    Args:
        local_rank: ``hvd.local_rank()`` (0 for a process outside Horovod).
        threads_per_worker: CPU threads for this worker (CPU only).
        local_size: ``hvd.local_size()``, workers on this host.
        pin: ``False``: do not confine this worker to its cores (a benchmark's control).

    Returns:
        The device this worker uses: ``"/gpu:0"`` or ``"/cpu:0"``.

    Raises:
        ValueError: Invalid ranks/sizes or ``threads_per_worker < 1``.
        DevicesAlreadyInitializedError: TensorFlow already initialised its devices.
    """
    if isinstance(local_rank, bool) or not isinstance(local_rank, int) or local_rank < 0:
        raise ValueError(f"local_rank must be an int >= 0, got {local_rank!r}")
    if not isinstance(local_size, int) or local_size < 1 or local_rank >= local_size:
        raise ValueError(f"need 0 <= local_rank < local_size, got local_rank={local_rank}, "
                         f"local_size={local_size!r}")
    if threads_per_worker is not None and (not isinstance(threads_per_worker, int)
                                           or threads_per_worker < 1):
        raise ValueError(f"threads_per_worker must be an int >= 1, got {threads_per_worker!r}")

    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    share = worker_share(local_rank, local_size, gpus=len(gpus), threads=threads_per_worker, pin=pin)
    try:
        if gpus:
            gpu = gpus[share.gpu_index]
            tf.config.set_visible_devices(gpu, "GPU")
            tf.config.experimental.set_memory_growth(gpu, True)
            return "/gpu:0"
        set_cpu_threads(share.threads)
        return "/cpu:0"
    except RuntimeError as exc:
        if isinstance(exc, DeviceError):
            raise
        raise DevicesAlreadyInitializedError(
            f"configure_worker must run before TensorFlow initialises its devices ({exc}); call it "
            "right after hvd.init(), before building datasets or models."
        ) from exc
