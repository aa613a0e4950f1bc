"""One recording of the course: its id, the notebooks' ``machine:`` stamps, and whether they all agree.

``make record`` (tools/maintainers/run_notebooks.py) records every notebook in one run on one machine; each notebook's first
output line is its stamp (course_lib.environment.machine.stamp), completed by the recorder with the load at the
notebook's end and the recording's id. :func:`disagreements` says where the committed notebooks and
``docs/run_times.json`` fail to be one recording: a stamp missing or not completed, two stamps naming different
CPUs, cores, GPUs, software or recordings, speed probes more than :data:`SPEED_SPREAD` apart, or an entry of
``docs/run_times.json`` that says something else than its notebook's stamp (tests/test_recording.py).

Introduced for issue 44 (``make record``).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from course_lib.environment.machine import STAMP_PREFIX, parse_stamp, stamp  # noqa: E402

#: The machine facts that must be the same in every notebook of one recording (the loads may differ).
SAME_MACHINE = ("cpu_model", "cores", "gpus", "python", "tensorflow", "horovod")
#: The launcher's queue message (course_lib.runner.slots.acquire), as tests/notebooks/sanitize.cfg finds it.
QUEUE_LINE = re.compile(r"(?m)^waiting for \d+ of \d+ slots?:[^\n]*")
#: The slowest notebook's speed probe may be at most this many times the fastest's. Measured on one 2-core VM with
#: nothing else running (other processes 0.00-0.02 cores through both recordings of 2026-11-28, 09:31Z and 09:51Z):
#: 0.174-0.269 s within one recording, 1.55x; VMs of this kind differ up to 3.7x (0.09-0.33 s).
SPEED_SPREAD = 2.0


class Refused(Exception):
    """A notebook cannot be recorded; ``reasons`` says why, ``remedy`` what to do."""

    def __init__(self, reasons: list[str], remedy: str) -> None:
        super().__init__("; ".join(reasons))
        self.reasons, self.remedy = reasons, remedy


def recording_id(now: _dt.datetime | None = None) -> str:
    """``2026-11-28T14:02Z <host>``: the recording's start (UTC, to the minute) and this machine's name."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return f"{now:%Y-%m-%dT%H:%MZ} {socket.gethostname()}"


def this_machine() -> dict[str, Any]:
    """This machine's facts as a stamp states them (the speed probe is not run)."""
    facts = parse_stamp(stamp(speed_s=0.0))
    assert facts is not None
    return facts


def stamp_output(nb: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
    """The first output of the first code cell and the facts of its first line, the ``machine:`` stamp.

    Raises:
        Refused: The first output line is not a stamp.
    """
    cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    output = cells[0].outputs[0] if cells and cells[0].get("outputs") else None
    text = "".join(output.get("text") or output.get("data", {}).get("text/plain", "")) if output else ""
    first = text.split("\n", 1)[0]
    facts = parse_stamp(first) if output and output.get("name") == "stdout" else None
    if output is None or facts is None:
        where = "no output" if output is None else "stdout" if output.get("name") == "stdout" else \
            output.get("name") or output.get("output_type")
        raise Refused([f"its first output line is not the machine: stamp (got {where}: {first[:120]!r})"],
                      "make the first code cell print course_lib.environment.machine.stamp() before anything "
                      "else (`from course_lib.environment.machine import stamp; print(stamp())`), then record again")
    return output, facts


def texts(nb: nbformat.NotebookNode) -> list[str]:
    """Every text a cell printed or displayed."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            found.append("".join(text) if isinstance(text, list) else text)
    return found


def queue_lines(nb: nbformat.NotebookNode) -> list[str]:
    """The slot-queue lines (``waiting for N of M slots: …``) the notebook's cells printed."""
    return [match.group(0) for text in texts(nb) for match in QUEUE_LINE.finditer(text)]


def differences(facts: dict[str, Any], reference: dict[str, Any]) -> list[str]:
    """The :data:`SAME_MACHINE` facts where ``facts`` differs from ``reference``."""
    return [f"{key} {facts[key]!r} (not {reference[key]!r})" for key in SAME_MACHINE if facts[key] != reference[key]]


def check_continuation(recording: str, entries: list[dict[str, Any]]) -> None:
    """Refuse to continue ``recording`` (its ``entries`` in docs/run_times.json) unless it began here, on this
    machine and software."""
    host = recording.split(" ", 1)[-1]
    why = [] if entries else [f"docs/run_times.json has no notebook of recording {recording!r}"]
    if host != socket.gethostname():
        why.append(f"recording {recording!r} was made on {host}, this machine is {socket.gethostname()}")
    if entries:
        why += [f"this machine has {d}" for d in differences(this_machine(), entries[0])]
    if why:
        raise Refused(why, "start a new recording of every notebook: make record")


def disagreements(root: Path = ROOT) -> list[str]:
    """Where the committed notebooks of ``root`` and its docs/run_times.json are not one recording (empty: they are)."""
    data = root / "docs" / "run_times.json"
    entries = json.loads(data.read_text()).get("notebooks", {}) if data.exists() else {}
    found: list[str] = []
    stamps: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        name = path.stem
        try:
            _, facts = stamp_output(nbformat.read(path, as_version=4))
        except Refused as no_stamp:
            found.append(f"{name}: {no_stamp.reasons[0]}")
            continue
        others = [line for text in texts(nbformat.read(path, as_version=4)) for line in text.splitlines()
                  if line.startswith(STAMP_PREFIX)][1:]   # the first is the stamp
        if others:
            found.append(f"{name}: {len(others)} more line(s) start {STAMP_PREFIX.strip()!r} besides the stamp "
                         f"(e.g. {others[0][:60]!r}); other facts of the machine start 'on this machine:'")
        if facts["recording"] is None:
            found.append(f"{name}: its stamp was not completed by make record (no load at end, no recording)")
            continue
        stamps[name] = facts
        entry = entries.get(name)
        if entry is None:
            found.append(f"{name}: docs/run_times.json has no entry")
            continue
        found += [f"{name}: docs/run_times.json says {key} {entry.get(key)!r}, its stamp {facts[key]!r}"
                  for key in (*SAME_MACHINE, "speed_probe_s", "load_start", "load_end", "recording")
                  if entry.get(key) != facts[key]]
    if stamps:
        first_name, first = next(iter(stamps.items()))
        for name, facts in stamps.items():
            found += [f"{name}: recording {facts['recording']!r}, {first_name}: {first['recording']!r}"
                      ] if facts["recording"] != first["recording"] else []
            found += [f"{name}: {d}, as {first_name} says" for d in differences(facts, first)]
        speeds = [facts["speed_probe_s"] for facts in stamps.values()]
        if min(speeds) > 0 and max(speeds) / min(speeds) > SPEED_SPREAD:
            found.append(f"speed probes from {min(speeds):.3f} to {max(speeds):.3f} s: more than "
                         f"{SPEED_SPREAD}x apart (a busy or another machine)")
    return found
