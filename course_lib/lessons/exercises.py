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
import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Exercise", "EXERCISES", "check", "check_horovod_run", "check_replica_step", "steps_shown"]


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


_KERAS_STEPS = re.compile(r"^\s*(\d+)/(\d+) - ")  # Keras verbose=2: "24/24 - 3s - loss: ..."


def _flag(command: list[str], name: str, default: int) -> int:
    """The int value of ``--name`` in an argument list, else ``default``."""
    for i, arg in enumerate(command):
        if arg == name and i + 1 < len(command):
            return int(command[i + 1])
        if arg.startswith(name + "="):
            return int(arg.split("=", 1)[1])
    return default


def steps_shown(run: Any) -> list[int]:
    """Steps per epoch that rank 0's Keras progress lines (``verbose=2``) report, one per epoch."""
    from course_lib.runner.runlog import parse_line

    steps = []
    for line in run.log:
        rank, _stream, text, _event = parse_line(line)
        match = _KERAS_STEPS.match(text) if rank == 0 else None
        if match and match.group(1) == match.group(2):
            steps.append(int(match.group(1)))
    return steps


def check_horovod_run(run: Any, *, workers: int = 2) -> bool:
    """Self-check of the coding exercise of notebooks/03_horovod.ipynb: is this a working Horovod run?

    The learner turns ``source_code/keras_fmnist.py`` into a Horovod script and runs it with
    ``launch.run_horovod(script, workers, [...])``. The check reads only what that run printed,
    so it holds no answer to copy: every rank reported the same weights digest (the gradients were
    averaged and the start broadcast), and rank 0's epochs ran
    ``ceil(train_subset / (batch_size × workers))`` steps (the data was divided among the workers).

    Args:
        run: The ``RunResult`` of ``course_lib.runner.launch.run_horovod``.
        workers: The number of workers the run was asked for.

    Returns:
        True when every property holds; prints what failed and a hint otherwise.
    """
    key = "03.horovod_script"
    if run is None:
        print(f"[{key}] not run yet — run your script with launch.run_horovod, then this cell.")
        return False
    problems = []
    ranks = sorted(getattr(run, "digests", {}))
    if ranks != list(range(workers)):
        problems.append(f"digest lines came from ranks {ranks}, expected {list(range(workers))}: print the "
                        "digest on every rank, with its own rank (hvd.rank())")
    elif len(set(run.digests.values())) != 1:
        problems.append("the ranks ended with DIFFERENT weights: are the gradients averaged "
                        "(hvd.DistributedOptimizer) and rank 0's start broadcast (BroadcastGlobalVariablesCallback)?")
    command = [str(arg) for arg in getattr(run, "command", [])]
    expected = math.ceil(_flag(command, "--train-subset", 60000) / (_flag(command, "--batch-size", 128) * workers))
    shown = steps_shown(run)
    if not shown:
        problems.append("rank 0 printed no Keras progress line ('N/N - ...'): keep verbose=2 on rank 0")
    elif any(steps != expected for steps in shown):
        problems.append(f"each epoch ran {shown[0]} steps: is one epoch one pass over the data by ALL workers "
                        "together (each worker reads its shard and runs 1/size of the steps)?")
    if problems:
        print(f"[{key}] not yet:\n- " + "\n- ".join(problems))
        return False
    print(f"[{key}] correct: {workers} ranks with identical weights, {shown[0]} steps per epoch each.")
    return True


def check_replica_step(replica_step: Callable[..., Any], strategy: Any, *, seed: int = 0) -> bool:
    """Self-check of the coding exercise of notebooks/02_mirrored_strategy.ipynb: a custom loop's step.

    ``replica_step(model, optimizer, images, labels)`` is the learner's function, run on every replica
    by ``strategy.run``. The check trains a small model with it for two steps — a full global batch of
    32 images, then a partial one of 24 — and the same model on one device with the plain mean loss
    over the same images. A correct step gives the same weights (float32 rounding aside); dividing by
    the per-replica batch, or by a fixed global batch at the partial step, or forgetting to apply the
    gradients, does not. No answer is stored: the reference is computed here, from the same images.

    Args:
        replica_step: The learner's function.
        strategy: A ``tf.distribute`` strategy with at least 2 replicas.
        seed: Seed of the weights and images.

    Returns:
        True when the two models end with the same weights.
    """
    import numpy as np
    import tensorflow as tf

    key = "02.replica_step"
    if strategy.num_replicas_in_sync < 2:
        print(f"[{key}] needs a strategy with at least 2 replicas, got {strategy.num_replicas_in_sync}.")
        return False
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(56, 28, 28, 1)).astype("float32")
    labels = rng.integers(0, 10, size=56)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(32)

    def small_model() -> Any:
        init = tf.keras.initializers.GlorotUniform(seed=seed)
        return tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28, 1)),
                                    tf.keras.layers.Dense(10, kernel_initializer=init)])

    reference = small_model()
    ref_opt = tf.keras.optimizers.SGD(0.5)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for x, y in dataset:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, reference(x, training=True))
        ref_opt.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                    reference.trainable_variables))
    with strategy.scope():
        model = small_model()
        optimizer = tf.keras.optimizers.SGD(0.5)
    try:
        for x, y in strategy.experimental_distribute_dataset(dataset):
            strategy.run(replica_step, args=(model, optimizer, x, y))
    except NotImplementedError:
        print(f"[{key}] not written yet — write my_replica_step in the cell above and run both cells.")
        return False
    except Exception as exc:  # the learner's code failed: say how, do not crash the notebook
        print(f"[{key}] not yet: your step raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return False
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(model.get_weights(), reference.get_weights()))
    if gap < 1e-5:
        print(f"[{key}] correct: two replicas give the weights of one device on the same images.")
        return True
    print(f"[{key}] not yet: the weights differ from one device's by up to {gap:.2g}. Hint: divide the sum of "
          "the per-example losses by the images of this step on ALL replicas (the last step is partial), "
          "then apply the gradients.")
    return False
