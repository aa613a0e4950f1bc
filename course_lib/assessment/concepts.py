"""The concept questions: numeric answers, each with its stated tolerance, computed by the course's own functions.

Each question's numbers are in :data:`QUESTIONS` (the notebook prints them from here, so the text and the grader
cannot drift apart); :func:`expected` computes the answer with the function the course teaches it with
(:class:`course_lib.training.epochs.EpochPlan`, :func:`course_lib.lessons.common.ring.ring_factor`), and
:func:`grade_concept` accepts an answer within the tolerance and names the misconception a known wrong answer
shows (dividing epochs by the workers; counting the bytes of one worker's gradient once, or the ring's full 2×).

Introduced in assessment/source/ddp/assessment.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from course_lib.assessment import spec
from course_lib.assessment.code import Part
from course_lib.lessons.common.ring import ring_factor
from course_lib.training.epochs import EpochPlan

__all__ = ["Question", "QUESTIONS", "expected", "grade_concept"]


@dataclass(frozen=True)
class Question:
    """One numeric question: its text, its tolerance (absolute ``abs_tol`` or relative ``rel_tol``)."""

    text: str
    abs_tol: float = 0.0
    rel_tol: float = 0.0


QUESTIONS = {
    "concept_steps": Question(
        "60 000 training images, 4 Horovod workers, a batch of 128 images per worker. One epoch is one pass over "
        "the training set by all workers together. How many steps does each worker run in one epoch? "
        "(an integer; exact)"),
    "concept_epochs": Question(
        "A 1-worker run reached its accuracy in 12 epochs. You move it to 4 workers with the same per-worker batch "
        "and the learning-rate rule. How many epochs do you ask for, to train on as many images in total? "
        "(an integer; exact)"),
    "concept_global_batch": Question(
        "8 workers, 64 images per worker per step, gradients accumulated over 2 batches before each update. "
        "How many images does one update average over (the global batch)? (an integer; exact)"),
    "concept_allreduce_bytes": Question(
        "A model has 1 200 000 float32 parameters. One step's gradients are averaged by a ring all-reduce among "
        "4 workers. How many bytes does each worker SEND in that all-reduce? (within 1 %)", rel_tol=0.01),
}


def expected(name: str) -> float:
    """The answer to question ``name``, computed with the course's functions."""
    if name == "concept_steps":
        return float(EpochPlan(60_000, 128, 4).steps_per_epoch)
    if name == "concept_epochs":
        return 12.0  # an epoch is a pass over the data by all workers together: the count does not change
    if name == "concept_global_batch":
        return 8 * 64 * 2.0
    if name == "concept_allreduce_bytes":
        return ring_factor(4) * 1_200_000 * 4
    raise KeyError(f"no question {name!r}; known: {sorted(QUESTIONS)}")


_MISCONCEPTIONS = {
    ("concept_steps", 469.0): "469 is the steps of ONE worker alone; each of the 4 workers reads a quarter",
    ("concept_steps", 117.0): "117 rounds down: the last, partial batch of a shard is a step too",
    ("concept_epochs", 3.0): "dividing epochs by the workers: an epoch already counts the images of all workers",
    ("concept_global_batch", 512.0): "512 leaves out the accumulation: each update averages 2 batches per worker",
    ("concept_allreduce_bytes", 4_800_000.0): "4.8 MB is one gradient's size; a ring sends 2 (N-1)/N of it",
    ("concept_allreduce_bytes", 9_600_000.0): "9.6 MB is 2x the gradient; a ring sends 2 (N-1)/N of it, not 2",
}


def grade_concept(name: str, answer: Any) -> Part:
    """The points of one answer: all within the tolerance, else none with the reason (and the misconception)."""
    question, points = QUESTIONS[name], spec.POINTS[name]
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not math.isfinite(answer):
        return Part(name, 0, points, f"the answer {answer!r} is not a number")
    right = expected(name)
    if abs(float(answer) - right) <= max(question.abs_tol, question.rel_tol * abs(right)):  # of the right answer
        return Part(name, points, points)
    why = _MISCONCEPTIONS.get((name, float(answer)), "not within the stated tolerance")
    return Part(name, 0, points, f"{answer!r}: {why}")
