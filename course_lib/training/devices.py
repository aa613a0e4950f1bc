"""What hardware is really there, simulated devices, and per-worker pinning.

On a machine with one GPU (or none) the course still shows data parallelism by splitting the
GPU into virtual GPUs or the CPU into logical CPUs. TensorFlow only accepts that split before it
initialises its devices, so :func:`simulate_devices` must run before anything else uses
TensorFlow; importing this module does not import TensorFlow.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

__all__ = [
    "DeviceError",
    "DevicesAlreadyInitializedError",
    "DeviceReport",
    "cpu_cores",
    "cores_per_worker",
    "set_cpu_threads",
    "gpu_names",
    "simulate_devices",
    "describe",
    "configure_worker",
    "WorkerPlan",
    "plan_workers",
]

_RESTART_HINT = ("restart the kernel (Kernel ▸ Restart) and call simulate_devices before anything "
                 "else uses TensorFlow")
_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.+?)\s*(?:\(UUID:.*\))?\s*$")

# (kind, names, memory_limit_mb) of the last successful simulate_devices call in this process.
_simulated: tuple[str, list[str], int | None] | None = None


class DeviceError(RuntimeError):
    """A device could not be configured as asked."""


class DevicesAlreadyInitializedError(DeviceError):
    """TensorFlow already initialised its devices; they can no longer be split or pinned."""


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

    def text(self) -> str:
        """A plain multi-line statement of the hardware, real and simulated."""
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
        return "\n".join(lines)


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


def cores_per_worker(local_size: int) -> int:
    """CPU threads each of ``local_size`` workers on one host gets: ``max(1, cores // local_size)``.

    Args:
        local_size: Workers on this host (``hvd.local_size()``), >= 1.

    Returns:
        The share of this machine's cores (:func:`cpu_cores`), at least 1.
    """
    if isinstance(local_size, bool) or not isinstance(local_size, int) or local_size < 1:
        raise ValueError(f"local_size must be an int >= 1, got {local_size!r}")
    return max(1, cpu_cores() // local_size)


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


def configure_worker(local_rank: int, *, threads_per_worker: int | None = None,
                     local_size: int = 1) -> str:
    """Give one Horovod worker its own device; call before TensorFlow initialises devices.

    With GPUs: only GPU ``local_rank % GPUs`` is made visible (with memory growth, so that
    workers sharing a GPU each take only what they use), so inside this process it is ``/gpu:0``.
    Without GPUs: intra-op threads = ``threads_per_worker`` (default
    ``max(1, cores // local_size)``, so the workers of one host share its cores instead of
    oversubscribing them) and inter-op threads = 1 (Keras runs one step's ops in sequence;
    Horovod's allreduce is asynchronous and needs no inter-op thread of its own).

    Args:
        local_rank: ``hvd.local_rank()``.
        threads_per_worker: CPU threads for this worker (CPU only).
        local_size: ``hvd.local_size()``, workers on this host.

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
    try:
        if gpus:
            gpu = gpus[local_rank % len(gpus)]  # more workers than GPUs share them (plan_workers)
            tf.config.set_visible_devices(gpu, "GPU")
            tf.config.experimental.set_memory_growth(gpu, True)  # so that sharers both fit
            return "/gpu:0"
        set_cpu_threads(threads_per_worker or cores_per_worker(local_size))
        return "/cpu:0"
    except RuntimeError as exc:
        if isinstance(exc, DeviceError):
            raise
        raise DevicesAlreadyInitializedError(
            f"configure_worker must run before TensorFlow initialises its devices ({exc}); call it "
            "right after hvd.init(), before building datasets or models."
        ) from exc


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
        text: One plain sentence for the learner.
    """

    workers: int
    gpus: int
    cpu_cores: int
    share_gpu: bool
    oversubscribe: bool
    full_data: bool
    text: str


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
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
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
    return WorkerPlan(workers, gpus, cores, share_gpu, workers > slots, gpus > 0, text)
