"""What this machine can run at once, and how many workers a lesson starts on it.

:func:`machine_capacity` is the ONE owner of "slots": a slot is one concrete CPU core (its id) or one
GPU (its index), ``$COURSE_SLOTS`` keeps only the first N of them, and every caller asks it: the lessons'
plans (:func:`plan_workers`), the launcher and its machine-wide slot files (:mod:`course_lib.runner.slots`),
the control panel (:mod:`course_lib.lessons.horovod.widgets`) and the multi-worker runs. Each decision is a
function of counts, so it is tested for any machine shape (tests/test_capacity.py: 0, 1, 2 and 8 GPUs,
``$COURSE_SLOTS``, a cpuset smaller than the core count). Nothing here imports TensorFlow.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from course_lib.training.machine.hardware import _count, cpu_core_ids, gpu_names, span

__all__ = ["CapacityError", "Capacity", "machine_capacity", "machine_slots", "device_for", "WorkerPlan",
           "plan_workers", "mirrored_layout"]


class CapacityError(ValueError):
    """``$COURSE_SLOTS`` or a device choice does not fit this machine (the message says how to fix it)."""


@dataclass(frozen=True)
class Capacity:
    """What this machine can run at once: its worker slots, each a concrete core or GPU.

    A slot of kind ``"cpu"`` is one CPU core (its id as the operating system numbers it); a slot of kind
    ``"gpu"`` is one GPU (its index as ``nvidia-smi`` numbers it). Two runs that hold different slots
    never share a core or a GPU: that is what the launcher's grants rely on (notebook 03).

    Attributes:
        kind: ``"cpu"`` or ``"gpu"``.
        ids: The slots' core ids or GPU indices, ascending (``len(ids)`` is the number of slots).
        gpus: Physical GPUs of the machine. cores: Core ids this process may use.
    """

    kind: str
    ids: tuple[int, ...]
    gpus: int
    cores: tuple[int, ...]

    @property
    def slots(self) -> int:
        """How many workers the machine runs without oversubscribing (of this kind)."""
        return len(self.ids)

    def describe(self) -> str:
        """e.g. ``"2 CPU cores (0-1)"`` or ``"2 GPUs (0, 1)"``."""
        noun = "GPU" if self.kind == "gpu" else "CPU core"
        plural = "s" if self.slots != 1 else ""
        return f"{self.slots} {noun}{plural} ({', '.join(map(str, self.ids))})"


def machine_capacity(kind: str | None = None, *, gpus: int | None = None,
                     cores: tuple[int, ...] | None = None,
                     slots_env: str | None = None) -> Capacity:
    """The machine's worker slots: the ONE answer to "what can this machine run at once".

    Every caller asks this function: :func:`plan_workers`, the launcher and its slots
    (:mod:`course_lib.runner.slots`), the control panel and the multi-worker runs.

    Args:
        kind: ``"gpu"`` (one slot per GPU), ``"cpu"`` (one slot per core) or ``None``: GPUs where the
            machine has any, else cores.
        gpus: Physical GPUs; ``None`` asks ``nvidia-smi`` (:func:`gpu_names`).
        cores: Core ids this process may use; ``None`` uses :func:`cpu_core_ids`.
        slots_env: The value of ``$COURSE_SLOTS``; ``None`` reads the environment. When set, only the
            first N cores or GPUs are slots (an admin keeps the others for the hub, say).

    Returns:
        A :class:`Capacity`.

    Raises:
        CapacityError: ``$COURSE_SLOTS`` is not a positive int or exceeds the machine's cores/GPUs,
            or ``kind="gpu"`` on a machine without GPUs.

    Introduced in notebooks/03_horovod.ipynb.
    """
    gpus = len(gpu_names()) if gpus is None else _count("gpus", gpus, 0)
    cores = cpu_core_ids() if cores is None else tuple(sorted(cores))
    if kind is None:
        kind = "gpu" if gpus else "cpu"
    if kind not in ("cpu", "gpu"):
        raise CapacityError(f"device={kind!r} must be 'cpu', 'gpu' or None (GPUs where there are any)")
    if kind == "gpu" and not gpus:
        raise CapacityError("device='gpu' but nvidia-smi lists no GPU on this machine; use device='cpu' "
                            "(or None)")
    ids = tuple(range(gpus)) if kind == "gpu" else cores
    raw = os.environ.get("COURSE_SLOTS") if slots_env is None else slots_env
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise CapacityError(f"COURSE_SLOTS={raw!r} must be a positive int (the machine's worker "
                                "slots); unset it to use the machine's cores or GPUs")
        if int(raw) > len(ids):
            what = f"{len(ids)} GPU(s)" if kind == "gpu" else f"{len(ids)} CPU core(s) ({span(ids)})"
            raise CapacityError(f"COURSE_SLOTS={raw} exceeds this machine's {what}: a slot is one "
                                f"{'GPU' if kind == 'gpu' else 'core'}, so at most {len(ids)}; lower "
                                "COURSE_SLOTS or unset it (oversubscribe=True runs more workers than slots)")
        ids = ids[:int(raw)]
    return Capacity(kind, ids, gpus, cores)


def machine_slots(kind: str | None = None) -> int:
    """How many workers of ``kind`` this machine runs at once: ``machine_capacity(kind).slots``.

    Raises:
        CapacityError: As :func:`machine_capacity`.

    Introduced in notebooks/03_horovod.ipynb.
    """
    return machine_capacity(kind).slots


def device_for(workers: int, gpu_slots: int) -> str:
    """The device rule, written once: GPUs when the machine has a GPU slot per worker, else CPU cores.

    :func:`plan_workers` asks it for a lesson's plan, :meth:`WorkerPlan.with_workers` for one run of
    another size, and the launcher (:func:`course_lib.runner.slots.plan_placement`) for a run given as a
    bare worker count. Two ranks never share a GPU: NCCL refuses it (horovod#3929).

    Args:
        workers: The run's workers (ranks, or slots held).
        gpu_slots: The machine's GPU slots (``machine_capacity("gpu").slots``; 0 without GPUs).

    Returns:
        ``"gpu"`` or ``"cpu"``.

    Introduced in notebooks/03_horovod.ipynb.
    """
    return "gpu" if gpu_slots and gpu_slots >= workers else "cpu"


@dataclass(frozen=True)
class WorkerPlan:
    """How many Horovod workers a lesson starts on this machine, on which device, and what that means.

    Attributes:
        workers: Processes of the lesson's multi-worker runs (its 1-worker runs are the baseline).
        gpus: Physical GPUs found.
        cpu_cores: CPU cores this process may use.
        device: ``"gpu"`` (one worker per GPU) or ``"cpu"`` (CPU processes). The launchers read it from
            the plan (``run_horovod(script, args, workers=plan)``); a lesson's 1-worker baseline passes
            ``workers=plan.with_workers(1)``, so both run on the same kind of device.
        slots: The machine's slots of that device (:func:`machine_capacity`).
        oversubscribe: More workers than slots (CPU only); the launchers read it from the plan.
        full_data: Train on the full data set (one GPU per worker) rather than a CPU-sized subset.
        text: One plain sentence for the learner (it names this machine's counts: print it on a
            ``machine:`` line).
        ideal_efficiency: The best weak-scaling efficiency the multi-worker run can show here,
            ``min(workers, slots) / workers``: 1.0 when every worker has its own GPU or core, 0.5 when
            2 workers take turns on one core.
    """

    workers: int
    gpus: int
    cpu_cores: int
    device: str
    slots: int
    oversubscribe: bool
    full_data: bool
    text: str
    ideal_efficiency: float = 1.0

    def with_workers(self, workers: int, *, oversubscribe: bool | None = None) -> "WorkerPlan":
        """This machine's plan for one run of ``workers`` workers (a 1-worker baseline, a 3-rank run).

        The plan's device while it has a slot per worker (:func:`device_for`): a GPU plan asked for more
        workers than GPUs runs them as CPU processes, a CPU plan stays on CPU cores (a lesson's baseline
        and its multi-worker runs on the same kind of device).

        Args:
            workers: The run's workers (>= 1; ``run_python``: the slots its one process holds, >= 0).
            oversubscribe: Allow more workers than slots; ``None``: when there are more (CPU only).

        Returns:
            A :class:`WorkerPlan` (the same counts and text; ``workers``, ``device``, ``oversubscribe``
            and ``ideal_efficiency`` for this run).

        Introduced in notebooks/03_horovod.ipynb.
        """
        _count("workers", workers, 0)
        device = "gpu" if self.device == "gpu" and device_for(workers, self.slots) == "gpu" else "cpu"
        slots = self.slots if device == self.device else self.cpu_cores
        if oversubscribe is None:
            oversubscribe = device == "cpu" and workers > slots
        efficiency = min(workers, slots) / workers if workers else 1.0
        return replace(self, workers=workers, device=device, oversubscribe=oversubscribe,
                       ideal_efficiency=efficiency)


def plan_workers(gpus: int | None = None, cores: int | None = None, *, at_least: int = 2,
                 at_most: int = 8, slots_env: str | None = None) -> WorkerPlan:
    """Decide how many Horovod workers a lesson runs, and on which device: one per GPU, at least
    ``at_least``, never two on one GPU.

    - 2 or more GPU slots: one worker per GPU, ``at_least`` to ``at_most`` of them.
    - 0 GPUs: ``at_least`` CPU processes, each on its own core(s); oversubscribed when the machine has
      fewer core slots than that.
    - 1 GPU: NCCL refuses two ranks on one GPU ("Duplicate GPU detected", horovod#3929, #3949), and
      the course's Horovod is built with NCCL there, so the ``at_least`` workers run as CPU processes
      (the launcher hides the GPU from them). Notebook 02's MirroredStrategy uses the GPU, split into
      virtual GPUs (:func:`mirrored_layout`).

    Args:
        gpus: Physical GPUs; ``None`` asks ``nvidia-smi`` (:func:`gpu_names`).
        cores: CPU cores; ``None`` uses the cores this process may use (:func:`cpu_core_ids`).
        at_least: Fewest workers of a multi-worker run (>= 2: one worker is not data parallel).
        at_most: Most workers (>= ``at_least``).
        slots_env: ``$COURSE_SLOTS`` (``None`` reads the environment; see :func:`machine_capacity`).

    Returns:
        A :class:`WorkerPlan`.

    Raises:
        ValueError: Negative counts, ``at_least < 2`` or ``at_most < at_least``.
        CapacityError: ``$COURSE_SLOTS`` does not fit the machine.

    Introduced in notebooks/03_horovod.ipynb.
    """
    gpus = len(gpu_names()) if gpus is None else gpus
    core_ids = cpu_core_ids() if cores is None else tuple(range(max(1, _count("cores", cores, 0))))
    _count("gpus", gpus, 0)
    if isinstance(at_least, bool) or not isinstance(at_least, int) or at_least < 2:
        raise ValueError(f"at_least must be an int >= 2 (one worker is not data parallel), got {at_least!r}")
    if not isinstance(at_most, int) or at_most < at_least:
        raise ValueError(f"at_most must be an int >= at_least={at_least}, got {at_most!r}")
    ncores = len(core_ids)
    gpu_slots = machine_capacity("gpu", gpus=gpus, cores=core_ids, slots_env=slots_env).slots if gpus else 0
    if device_for(at_least, gpu_slots) == "gpu":
        workers = min(gpu_slots, at_most)
        return WorkerPlan(workers, gpus, ncores, "gpu", gpu_slots, False, True,
                          f"{gpus} GPUs: {workers} workers, one per GPU.", 1.0)
    slots = machine_capacity("cpu", gpus=gpus, cores=core_ids, slots_env=slots_env).slots
    workers = at_least
    if gpus:
        text = (f"{gpus} GPU{'s' if gpus != 1 else ''}: NCCL refuses two workers on one GPU "
                f"(horovod#3929), so the {workers} workers run as CPU processes, each on its own "
                f"core{'s' if slots // workers > 1 else ''} of this machine's {ncores}; notebook 02 "
                "splits the GPU into virtual GPUs instead.")
    else:
        text = (f"No GPU: {workers} workers run as CPU processes, each on its own core of "
                f"this machine's {ncores}"
                + (" (more workers than cores: they take turns, so timings are pessimistic)."
                   if workers > slots else "."))
    return WorkerPlan(workers, gpus, ncores, "cpu", slots, workers > slots, False, text,
                      min(workers, slots) / workers)


def mirrored_layout(replicas: int, gpus: int) -> tuple[str, bool]:
    """Where notebook 02's MirroredStrategy puts ``replicas`` replicas on a machine with ``gpus`` GPUs.

    Args:
        replicas: Replicas wanted, >= 1.
        gpus: Physical GPUs, >= 0.

    Returns:
        ``(kind, simulated)``: ``("gpu", False)`` when there is a GPU per replica; otherwise the
        replicas are simulated on one chip (GPU 0 split, or the CPU split) and share it. Notebook 02
        measures what sharing costs against one device with the same global batch; no efficiency
        bound follows from the layout alone (a larger global batch alone runs faster).

    Raises:
        ValueError: ``replicas < 1`` or ``gpus < 0``.
    """
    _count("replicas", replicas, 1)
    _count("gpus", gpus, 0)
    if gpus >= replicas:
        return "gpu", False
    return ("gpu" if gpus else "cpu"), replicas > 1
