"""Self-check cells for the notebooks' exercises.

Each exercise has a key (``"02.global_batch"``), a question, a checker and a hint. A notebook's
exercise cell sets ``answer = ...`` and the next cell calls :func:`check`; it prints whether the
answer is right, a hint when it is not, and returns the verdict. Instructors find worked solutions
in ``instructor/solutions/`` (hidden from the learners' lab); ``tests/test_exercises.py`` proves
each checker accepts the solution
and rejects typical wrong answers.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Exercise", "EXERCISES", "check"]


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``accepts(answer)`` tells right from wrong."""

    key: str
    question: str
    accepts: Callable[[Any], bool]
    hint: str


def _close(expected: float, rel: float = 1e-3) -> Callable[[Any], bool]:
    def accepts(answer: Any) -> bool:
        try:
            value = float(answer)
        except (TypeError, ValueError):
            return False
        return math.isclose(value, expected, rel_tol=rel)
    return accepts


def _equals(expected: Any) -> Callable[[Any], bool]:
    return lambda answer: answer == expected


EXERCISES: dict[str, Exercise] = {exercise.key: exercise for exercise in [
    Exercise("00.global_batch",
             "MirroredStrategy with 4 replicas and a per-replica batch of 64: what is the global batch?",
             _equals(256), "the global batch is per-replica batch × number of replicas"),
    Exercise("00.steps",
             "60 000 training images, global batch 256, last partial batch kept: steps in one epoch?",
             _equals(235), "ceil(60000 / 256)"),
    Exercise("01.ring_bytes",
             "Ring all-reduce of a 4 MB gradient over 8 workers: MB sent by each worker?",
             _close(7.0), "each worker sends 2 (N - 1) / N × the gradient size"),
    Exercise("01.efficiency",
             "1 device: 1 000 img/s; 4 devices: 3 000 img/s. Scaling efficiency (0..1)?",
             _close(0.75), "efficiency = T_N / (N × T_1)"),
    Exercise("01.trap",
             "An epoch ran 58 steps of global batch 1 024 in 10 s (60 000 images in the data set). "
             "True images/s?",
             _close(5939.2), "count what ran: steps × global batch, not the data set's length"),
    Exercise("02.loss_scale",
             "Custom loop, 2 replicas, per-replica batch 32: by what number must each replica divide "
             "its SUM of per-example losses?",
             _equals(64), "divide by the GLOBAL batch, so the all-reduced sum is the mean over all replicas"),
    Exercise("02.replicas_steps",
             "Going from 1 to 2 replicas at a fixed per-replica batch of 64 on 60 000 images: steps per "
             "epoch with 2 replicas?",
             _equals(469), "ceil(60000 / (64 × 2))"),
    Exercise("03.epochs",
             "horovodrun -np 4, per-worker batch 32, 60 000 images: steps per epoch on each worker?",
             _equals(469), "one epoch = one pass over the data by all workers together: ceil(60000 / (32 × 4))"),
    Exercise("03.scaled_lr",
             "Base learning rate 0.001 for one worker; linear scaling rule with 8 workers: learning rate?",
             _close(0.008), "multiply by the number of workers (hvd.size())"),
    Exercise("04.steps_ratio",
             "Same epochs, 8× larger global batch: how many times fewer optimizer steps?",
             _equals(8), "steps per epoch = data size / global batch"),
]}


def check(key: str, answer: Any) -> bool:
    """Print and return whether ``answer`` solves exercise ``key``.

    Args:
        key: The exercise key shown in the notebook, e.g. ``"02.loss_scale"``.
        answer: The learner's answer; ``None`` means "not answered yet".

    Returns:
        True when the answer is right.

    Raises:
        KeyError: If ``key`` names no exercise (the message lists the known keys).
    """
    if key not in EXERCISES:
        raise KeyError(f"no exercise {key!r}; known: {', '.join(sorted(EXERCISES))}")
    exercise = EXERCISES[key]
    if answer is None:
        print(f"[{key}] not answered yet — set `answer` in the cell above and run both cells.")
        return False
    if exercise.accepts(answer):
        print(f"[{key}] correct.")
        return True
    print(f"[{key}] not yet: {answer!r} is not right. Hint: {exercise.hint}.")
    return False
