"""What a measurement ran on: CPU model, cores, GPUs, speed, versions and load, and the ``machine:`` stamp.

Every notebook's first output is one ``machine:`` line (:func:`stamp`), so that a learner reading committed
outputs knows which machine, software and load produced them; ``make record`` (tools/maintainers/run_notebooks.py) adds the
load at the end of the run and the recording's date to that line, and refuses outputs recorded beside other work.
The benchmarks (``benchmarks/``) describe their machine with :func:`describe_machine` from the same functions.
Nothing here imports TensorFlow or Horovod (versions are read from package metadata).

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import time
from pathlib import Path

from course_lib.environment.doctor_report import package_version  # one place reads package versions
from course_lib.training.machine.hardware import cpu_cores, gpu_names

__all__ = ["cpu_model", "load_average", "speed_probe", "describe_machine", "stamp", "STAMP_PREFIX", "parse_stamp",
           "complete_stamp"]

#: The words every stamp starts with (nbval masks whole ``machine:`` lines: tests/notebooks/sanitize.cfg).
STAMP_PREFIX = "machine: "
#: One stamp line, as :func:`stamp` prints it and :func:`complete_stamp` completes it (``load_end`` and
#: ``recording`` only in a recorded notebook's committed outputs).
STAMP = re.compile(
    r"^machine: (?P<cpu_model>.+), (?P<cores>\d+) CPU cores?, (?P<gpus>no GPU|\d+ GPUs? \(.*\)); "
    r"speed probe (?P<speed_probe_s>\d+(?:\.\d+)?) s; Python (?P<python>\S+), TensorFlow (?P<tensorflow>\S+), "
    r"Horovod (?P<horovod>\S+); load (?P<load_start>\d+(?:\.\d+)?|unknown) at start"
    r"(?:; load (?P<load_end>\d+(?:\.\d+)?|unknown) at end; recording (?P<recording>\S+ \S+))?$")


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


def speed_probe(rounds: int = 3, n: int = 2_000_000) -> float:
    """Seconds of the fastest of ``rounds`` runs of one fixed pure-Python loop on one core (lower is faster).

    The course's VMs differ up to 3x in speed from one to the next (0.09-0.33 s seen); printed beside a
    measurement, it tells a slower machine from a slower program.
    """
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for i in range(n):
            total += i * i % 7
        best = min(best, time.perf_counter() - start)
    return round(best, 3)


def describe_machine() -> dict:
    """Everything that says on what a result was measured.

    Returns:
        ``{"host", "cores", "cpu_model", "gpus", "python", "tensorflow", "horovod",
        "platform", "load_average"}``.
    """
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


def stamp(info: dict | None = None, speed_s: float | None = None) -> str:
    """The one ``machine:`` line a notebook prints first: CPU, cores, GPUs, speed probe, versions, load now.

    Args:
        info: :func:`describe_machine`'s dict (tests); default: this machine now.
        speed_s: :func:`speed_probe`'s seconds (tests); default: measured now (about 3 x 0.1-0.3 s).

    Returns:
        e.g. ``"machine: Intel(R) Xeon(R) Processor, 2 CPU cores, no GPU; speed probe 0.195 s; Python 3.12.1,
        TensorFlow 2.18.1, Horovod 0.28.1; load 0.30 at start"``.
    """
    info = describe_machine() if info is None else info
    speed_s = speed_probe() if speed_s is None else speed_s
    gpus = info.get("gpus") or []
    gpu_text = "no GPU" if not gpus else f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({', '.join(sorted(set(gpus)))})"
    cores = info.get("cores")
    load = info.get("load_average")
    load_text = f"load {load[0]:.2f} at start" if load else "load unknown at start"
    return (f"{STAMP_PREFIX}{info.get('cpu_model')}, {cores} CPU core{'s' if cores != 1 else ''}, {gpu_text}; "
            f"speed probe {speed_s:.3f} s; Python {info.get('python')}, TensorFlow {info.get('tensorflow')}, "
            f"Horovod {info.get('horovod')}; {load_text}")



def parse_stamp(line: str) -> dict | None:
    """The facts of one ``machine:`` stamp line (None when ``line`` is not one).

    Returns:
        ``{"cpu_model", "cores", "gpus", "speed_probe_s", "python", "tensorflow", "horovod", "load_start",
        "load_end", "recording"}``: cores an int, the speed probe and loads floats (None where unknown or, for
        ``load_end`` and ``recording``, before ``make record`` completed the line).
    """
    match = STAMP.match(line.rstrip("\n"))
    if match is None:
        return None
    facts: dict = match.groupdict()
    facts["cores"] = int(facts["cores"])
    facts["speed_probe_s"] = float(facts["speed_probe_s"])
    for key in ("load_start", "load_end"):
        facts[key] = None if facts[key] in (None, "unknown") else float(facts[key])
    return facts


def complete_stamp(line: str, *, load_end: float | None, recording: str) -> str:
    """A printed stamp with the end of its recording: ``…; load 1.85 at end; recording 2026-11-28T14:02Z host``.

    Args:
        line: The stamp the notebook printed (:func:`stamp`, not completed yet).
        load_end: The 1-minute load average when the notebook's run ended (None: unknown).
        recording: The recording's id (its start, ``YYYY-MM-DDTHH:MMZ``, and the host), shared by every notebook
            of one ``make record`` run.

    Raises:
        ValueError: ``line`` is not a stamp, is completed already, or ``recording`` is not ``<date> <host>``.
    """
    facts = parse_stamp(line)
    if facts is None or facts["recording"] is not None:
        raise ValueError(f"not a stamp to complete (machine: ..., load N at start): {line!r}")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\dZ \S+", recording):
        raise ValueError(f"a recording id is '<YYYY-MM-DDTHH:MMZ> <host>', got {recording!r}")
    end = "unknown" if load_end is None else f"{load_end:.2f}"
    return f"{line.rstrip()}; load {end} at end; recording {recording}"
