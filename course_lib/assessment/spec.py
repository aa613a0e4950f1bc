"""What the code task's grader launches and what it asks of the run: one place for every number.

The accuracy threshold and the time limit come from the reference solution's pilot
(``assessment/pilot.json``, made by ``instructor/assessment/pilot.py``): the threshold is the lowest test accuracy
of the solution over its pilot seeds minus :data:`ACCURACY_MARGIN`; the time limit is :data:`TIME_MULTIPLE` times
the solution's slowest pilot launch, scaled by this machine's speed probe against the pilot machine's
(:func:`course_lib.environment.machine.speed_probe`: seconds of a fixed loop, so a machine twice as slow gets twice
the time), never below :data:`MIN_TIME_S`.

Introduced in assessment/source/ddp/assessment.ipynb.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WORKERS", "SCRIPT_ARGS", "ACCURACY_MARGIN", "TIME_MULTIPLE", "MIN_TIME_S", "PILOT_FILE", "POINTS",
           "PASS_MARK", "Pilot", "load_pilot", "time_limit_s"]

#: The code task is graded at this many workers (the largest run of the notebooks: 03 and 05 use 2).
WORKERS = 2
#: The grader's arguments of the learner's script (besides ``--checkpoint-dir`` and ``--seed``).
SCRIPT_ARGS = ("--json", "--epochs", "2", "--batch-size", "64", "--lr", "0.001", "--optimizer", "adam",
               "--train-subset", "6000", "--test-subset", "2000")
#: The grader's seed (the pilot's are 1..10; the grade uses another, so a solution is not tuned to it).
GRADE_SEED = 55
ACCURACY_MARGIN = 0.03
TIME_MULTIPLE = 3.0
MIN_TIME_S = 180.0
PILOT_FILE = Path(__file__).resolve().parents[2] / "assessment" / "pilot.json"

#: Points per graded cell (grade_id: points); the notebook's cells carry the same numbers (a test checks it).
POINTS = {
    "code_weights": 8, "code_coverage": 8, "code_checkpoints": 6, "code_lr_rule": 6, "code_accuracy": 8,
    "code_time": 4,
    "measure_efficiency": 10, "measure_verdict": 5,
    "concept_steps": 5, "concept_epochs": 5, "concept_global_batch": 5, "concept_allreduce_bytes": 10,
    "written_answer": 20,
}
#: Of :data:`POINTS`' 100, a pass needs this many (70 %); self-paced, of the 80 autograded ones: 56.
PASS_MARK = 70
AUTOGRADED = {key: value for key, value in POINTS.items() if key != "written_answer"}


@dataclass(frozen=True)
class Pilot:
    """The reference solution's pilot: its test accuracies and launch times, on a machine of known speed."""

    accuracies: tuple[float, ...]
    launch_s: tuple[float, ...]
    speed_probe_s: float

    @property
    def threshold(self) -> float:
        """The lowest pilot accuracy minus :data:`ACCURACY_MARGIN`, rounded down to 3 decimals."""
        return int((min(self.accuracies) - ACCURACY_MARGIN) * 1000) / 1000


def load_pilot(path: Path = PILOT_FILE) -> Pilot:
    """Read ``assessment/pilot.json`` (``accuracies``, ``launch_s``, ``speed_probe_s``)."""
    raw = json.loads(Path(path).read_text())
    if len(raw["accuracies"]) < 10:
        raise ValueError(f"{path}: a pilot needs at least 10 seeds, it has {len(raw['accuracies'])}")
    return Pilot(tuple(raw["accuracies"]), tuple(raw["launch_s"]), float(raw["speed_probe_s"]))


def time_limit_s(pilot: Pilot, speed_probe_s: float) -> float:
    """:data:`TIME_MULTIPLE` × the slowest pilot launch × (this machine's probe / the pilot's), at least
    :data:`MIN_TIME_S`."""
    return max(MIN_TIME_S, TIME_MULTIPLE * max(pilot.launch_s) * speed_probe_s / pilot.speed_probe_s)
