"""Describe the machine a benchmark ran on (without starting TensorFlow).

Cores (affinity mask), CPU model (``/proc/cpuinfo``), GPUs (``nvidia-smi -L``), load average,
and the versions of Python, TensorFlow and Horovod (package metadata, nothing imported).
"""

from __future__ import annotations

import os
import platform
import socket
import time
from pathlib import Path

from course_lib.environment.doctor import package_version  # one place reads package versions

__all__ = ["cpu_model", "package_version", "load_average", "describe_machine"]


def cpu_model(cpuinfo_text: str | None = None) -> str:
    """The CPU model name(s) from ``/proc/cpuinfo`` (``model name`` lines, deduplicated).

    Args:
        cpuinfo_text: The file's text (tests); default: read ``/proc/cpuinfo``.

    Returns:
        e.g. ``"AMD EPYC"``; several distinct models are joined with ``" + "``;
        ``platform.processor()`` or ``"unknown"`` when the file has no model line.
    """
    if cpuinfo_text is None:
        try:
            cpuinfo_text = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo_text = ""
    models: list[str] = []
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("model name", "cpu model", "processor name") and value.strip():
            if value.strip() not in models:
                models.append(value.strip())
    return " + ".join(models) or platform.processor() or "unknown"



def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def describe_machine() -> dict:
    """Everything that says on what a result was measured.

    Returns:
        ``{"host", "cores", "cpu_model", "gpus", "python", "tensorflow", "horovod",
        "platform", "load_average"}``.
    """
    from course_lib.training.devices import cpu_cores, gpu_names

    return {
        "host": socket.gethostname(),
        "cores": cpu_cores(),
        "cpu_model": cpu_model(),
        "gpus": gpu_names(),
        "python": platform.python_version(),
        "tensorflow": package_version("tensorflow", "tensorflow-cpu", "tensorflow-gpu"),
        "horovod": package_version("horovod"),
        "platform": platform.platform(),
        "load_average": load_average(),
    }


def speed_probe(rounds: int = 3, n: int = 2_000_000) -> float:
    """Seconds of the fastest of ``rounds`` runs of one fixed pure-Python loop on one core (issue 31).

    This VM's speed varies up to 2x from one run to the next; recorded beside each whole-suite timing
    (benchmarks/check_time.py), it tells a slower machine from a slower suite. Lower is faster.
    """
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for i in range(n):
            total += i * i % 7
        best = min(best, time.perf_counter() - start)
    return round(best, 3)
