"""What a launch holds on this machine, and how its ranks share it: one decision for every launcher.

``run_horovod``, ``run_python``, ``run_mpirun``, ``run_elastic`` and ``run_workers`` all ask
:func:`plan_placement` before they start anything. It answers with a :class:`PlaceRequest` (which
device, how many of the machine's slots to hold, how the ranks find their share) or ``None`` for runs
on other machines, and it raises :class:`LaunchError` for a run that does not fit: more workers than
slots without ``oversubscribe=True``, or two ranks on one GPU (NCCL refuses it). :func:`execute`
(:mod:`course_lib.runner.execute`) then holds the slots and hands each rank its share through the rank
wrapper (:data:`RANK_WRAPPER`, :mod:`course_lib.runner.place_rank`).

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from course_lib.runner.preflight import LaunchError, capacity, hosts_are_local
from course_lib.training.machine.capacity import Capacity
from course_lib.training.machine.hardware import gpu_count

__all__ = ["RANK_WRAPPER", "PlaceRequest", "plan_placement", "parse_hosts", "placed"]

#: What the launchers put in front of each rank's program on this machine (the launcher's own Python,
#: which has course_lib, whatever interpreter the ranks use).
RANK_WRAPPER = (sys.executable, "-m", "course_lib.runner.place_rank")


@dataclass(frozen=True)
class PlaceRequest:
    """The slots a run holds on this machine and how its ranks share them.

    Attributes:
        capacity: The machine's slots of the run's device (:func:`course_lib.runner.preflight.capacity`).
        slots: How many to hold (an oversubscribed run holds them all).
        workers: The run's ranks (more ranks than slots wrap round them).
        hosts: ``(name, slots)`` of the run's host list, for Gloo's and elastic's rank slots.
        hide_gpus: CPU ranks on a GPU machine get ``CUDA_VISIBLE_DEVICES=""``.
    """

    capacity: Capacity
    slots: int
    workers: int
    hosts: tuple[tuple[str, int], ...] = ()
    hide_gpus: bool = False

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"gpu"``."""
        return self.capacity.kind


def parse_hosts(hosts: str | None, workers: int) -> tuple[tuple[str, int], ...]:
    """``"a:1,b:2"`` (or the discovery script's ``"a:1 b:2"``) -> ``(("a", 1), ("b", 2))``;
    ``None`` -> ``(("localhost", workers),)``, what horovodrun uses without ``-H``."""
    if hosts is None:
        return (("localhost", workers),)
    out = []
    for part in hosts.replace(" ", ",").split(","):
        name, _, slots = part.strip().partition(":")
        if name:
            out.append((name, int(slots) if slots.isdigit() else 1))
    return tuple(out)


def plan_placement(workers: int, *, hosts: str | None = None, device: str | None = None,
                   oversubscribe: bool = False, hold: int | None = None) -> PlaceRequest | None:
    """Decide what a launch of ``workers`` ranks holds on this machine.

    Args:
        workers: Ranks of the run (for an elastic run, its most).
        hosts: The run's host list; hosts other than this machine: ``None`` is returned (the other
            machines' ranks place themselves, :func:`course_lib.training.machine.placement.worker_share`).
        device: ``"cpu"``, ``"gpu"`` or ``None``: GPUs when the machine has one per worker, else CPU
            cores (the GPUs are then hidden from the ranks).
        oversubscribe: Allow more workers than slots (CPU only; the run then holds every slot).
        hold: Slots to hold when it is not one per worker (``run_python(slots=...)``: one process on
            several cores or GPUs).

    Returns:
        The :class:`PlaceRequest`, or ``None`` for a run on other machines.

    Raises:
        LaunchError: It does not fit: more GPU ranks than GPUs, or more workers than slots without
            ``oversubscribe``; or a bad ``device`` / ``$COURSE_SLOTS``.
    """
    if not hosts_are_local(hosts):
        return None
    gpus = gpu_count()
    wanted = workers if hold is None else hold
    if device is None:
        device = "gpu" if gpus and capacity("gpu").slots >= wanted else "cpu"
    cap = capacity(device)
    if cap.kind == "gpu" and wanted > cap.slots:
        raise LaunchError(f"{wanted} GPU workers but this machine has {cap.describe()}: NCCL refuses two "
                          "ranks on one GPU (horovod#3929), so the course never places them so; use "
                          "fewer workers, or device='cpu' to run them as CPU processes")
    if wanted > cap.slots and not oversubscribe:
        raise LaunchError(
            f"num_workers={wanted} exceeds the {cap.slots} slots of this machine ({cap.describe()}); "
            "pass oversubscribe=True to run more processes than slots (they then share cores, so "
            "timings are not representative)")
    return PlaceRequest(cap, min(wanted, cap.slots), workers, parse_hosts(hosts, workers),
                        hide_gpus=cap.kind == "cpu" and gpus > 0)


def placed(request: PlaceRequest | None, program: list[str]) -> list[str]:
    """``program`` started through the rank wrapper when the run is placed, unchanged otherwise."""
    return list(RANK_WRAPPER) + program if request is not None else program
