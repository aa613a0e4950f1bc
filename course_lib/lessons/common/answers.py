"""The numeric and word answers of every notebook's exercises, by key: ``check("02.replicas_steps", answer)``.

Each exercise has a key (``"02.global_batch"``), a question written from its own ``numbers``, a
solver and a hint. The solver computes the expected answer from those numbers with the course's
own functions (``training.epochs``, ``training.pipeline``), so no answer is written down here
and a learner who opens this file in the lab reads the method, not the number. Answers that are
not a formula (a choice, a word) are compared as a salted sha256 of the normalised text.

A notebook's exercise cell sets ``answer = ...`` and the next cell calls :func:`check`; it prints
whether the answer is right, a hint when it is not, and returns the verdict, the one way every self-check
does (:mod:`course_lib.lessons.common.checks`). Whole-number answers
must be exact; real answers within 0.1 % (a rounded answer passes, a 1 % slip does not).
Instructors find worked solutions in ``instructor/solutions/`` (refused by the learners' lab);
``tests/test_exercises.py`` proves each checker accepts them and rejects near misses. The checks that run the
learner's code or read the learner's run are in their notebook's topic (``course_lib.lessons.<topic>.checks``).

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from course_lib.lessons.common.checks import right, waiting, wrong
from course_lib.training import epochs
from course_lib.training.pipeline import steps_per_epoch

__all__ = ["Exercise", "EXERCISES", "check", "answer_digest"]

#: Salt of the digests of word answers (with the exercise's key): a stored digest matches no public table. It keeps
#: the module's first name (``exercises``): a new salt would change every stored digest.
SALT = "course_lib.exercises.v1"


def _close(expected: float, rel: float = 1e-3) -> Callable[[Any], bool]:
    def accepts(answer: Any) -> bool:
        try:
            value = float(answer)
        except (TypeError, ValueError):
            return False
        return math.isclose(value, expected, rel_tol=rel)
    return accepts


def _equals(expected: int) -> Callable[[Any], bool]:
    def accepts(answer: Any) -> bool:
        return not isinstance(answer, bool) and isinstance(answer, numbers.Real) and answer == expected
    return accepts


def normalise(answer: Any) -> str:
    """A word answer as it is compared: NFKC, lower case, single spaces, no surrounding punctuation."""
    text = unicodedata.normalize("NFKC", str(answer)).casefold()
    return " ".join(text.split()).strip(" .!\"'`")


def answer_digest(key: str, answer: Any) -> str:
    """Salted sha256 (hex) of a word answer to exercise ``key``; instructors store it as ``Exercise.digest``."""
    return hashlib.sha256(f"{SALT}:{key}:{normalise(answer)}".encode()).hexdigest()


def _fmt(value: Any) -> str:
    """A number as the notebooks write it: ``60 000``, ``1 024``, ``0.001``, ``4``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}".replace(",", " ") if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True)
class Exercise:
    """One exercise. ``kind`` is ``"integer"`` (exact), ``"real"`` (within 0.1 %) or ``"words"`` (digest).

    ``numbers`` are the question's data (formatted into ``template`` and ``hint_template``);
    ``solve(**numbers)`` computes the expected answer with course_lib; a ``"words"`` exercise
    stores only ``digest`` = :func:`answer_digest` of the right answer.
    """

    key: str
    template: str
    numbers: Mapping[str, Any]
    kind: str
    hint_template: str
    solve: Callable[..., Any] | None = None
    digest: str = ""

    @property
    def question(self) -> str:
        """The question, with its numbers."""
        return self.template.format(**{name: _fmt(v) for name, v in self.numbers.items()})

    @property
    def hint(self) -> str:
        """The hint, with the question's numbers (never the answer)."""
        return self.hint_template.format(**{name: _fmt(v) for name, v in self.numbers.items()})

    def accepts(self, answer: Any) -> bool:
        """True when ``answer`` is right."""
        if self.kind == "words":
            return answer_digest(self.key, answer) == self.digest
        if self.solve is None:
            raise ValueError(f"exercise {self.key} has no solver")
        expected = self.solve(**self.numbers)
        if self.kind == "integer":
            return _equals(int(expected))(answer)
        return _close(float(expected))(answer)


# ----------------------------------------------------------------- solvers: course_lib's own arithmetic
def _global_batch(per_replica_batch: int, replicas: int) -> int:
    # Images per step on all replicas; it does not depend on the data set's size (any size will do).
    return epochs.epoch_arithmetic(per_replica_batch * replicas, per_replica_batch, replicas)["step_batch"]


def _steps(train_size: int, per_worker_batch: int, workers: int = 1) -> int:
    return epochs.epoch_arithmetic(train_size, per_worker_batch, workers)["steps_per_epoch"]


def _replica_steps(train_size: int, per_replica_batch: int, replicas: int) -> int:
    # MirroredStrategy: one process splits each global batch over the replicas (epochs.describe_epoch).
    return steps_per_epoch(train_size, per_replica_batch * replicas)




def _adam_moments_mb(parameters: int, ranks: int) -> float:
    # Two float32 moments per parameter, held whole by every data-parallel rank (ranks change nothing).
    return 2 * 4 * parameters / 1e6


EXERCISES: dict[str, Exercise] = {exercise.key: exercise for exercise in [
    Exercise("00.global_batch", "MirroredStrategy with {replicas} replicas and a per-replica batch of "
             "{per_replica_batch}: what is the global batch?", {"per_replica_batch": 64, "replicas": 4}, "integer",
             "how many images does ONE step process, counting every replica", _global_batch),
    Exercise("02.replicas_steps", "Going from 1 to {replicas} replicas at a fixed per-replica batch of "
             "{per_replica_batch} on {train_size} images: steps per epoch with {replicas} replicas?",
             {"train_size": 60_000, "per_replica_batch": 64, "replicas": 2}, "integer",
             "how many images does one step take with {replicas} replicas, and does the partial last "
             "batch count", _replica_steps),
    Exercise("03.epochs", "horovodrun -np {workers}, per-worker batch {per_worker_batch}, {train_size} images: "
             "steps per epoch on each worker?", {"train_size": 60_000, "per_worker_batch": 32, "workers": 4},
             "integer", "one epoch is one pass over the data by all workers together, "
             "each on its own shard; the partial last batch counts", _steps),
    Exercise("07.adam_state", "Adam's two float32 moments per parameter, {parameters} parameters, DDP over {ranks} "
             "ranks: MB (10^6 bytes) of moments on each rank?", {"parameters": 1_199_882, "ranks": 4}, "real",
             "how many bytes is one float32, how many moments per parameter, and which part of the model's state "
             "does one DDP rank keep", _adam_moments_mb),
]}


def check(key: str, answer: Any) -> bool:
    """Print and return whether ``answer`` solves exercise ``key``.

    Args:
        key: The exercise key shown in the notebook, e.g. ``"02.replicas_steps"``.
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
        return waiting(key)
    if exercise.accepts(answer):
        return right(key)
    return wrong(key, f"{answer!r} is not right.", exercise.hint)
