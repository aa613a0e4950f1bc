"""Self-checks of the coding exercises: they read what the learner's own code did, never a stored answer.

``check_ring_allreduce`` (notebooks/01_data_parallelism.ipynb) runs the learner's ring on arrays it draws;
``check_horovod_run`` (notebooks/03_horovod.ipynb) reads a Horovod run's output; ``check_replica_step``
(notebooks/02_mirrored_strategy.ipynb) runs the learner's replica step next to a one-device reference;
these three are re-exported by :mod:`course_lib.lessons.exercises`, where those notebooks import them.
``check_lr_schedule`` (notebooks/04_large_batch.ipynb) compares the learner's linear scaling + warm-up
schedule with the one the notebook's runs use, computed here (:func:`reference_rate`), not stored.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from course_lib.lessons.trials import peak_lr
from course_lib.runner.runlog import parse_line
from course_lib.training import schedules
from course_lib.training.epochs import epoch_arithmetic

__all__ = ["check_horovod_run", "check_replica_step", "check_ring_allreduce", "steps_shown", "LR_CASES",
           "reference_rate", "check_lr_schedule"]

_KERAS_STEPS = re.compile(r"^\s*(\d+)/(\d+) - ")  # Keras verbose=2: "24/24 - 3s - loss: ..."


def _flag(command: list[str], name: str, default: int) -> int:
    """The int value of ``--name`` in an argument list, else ``default``."""
    for i, arg in enumerate(command):
        if arg == name and i + 1 < len(command):
            return int(command[i + 1])
        if arg.startswith(name + "="):
            return int(arg.split("=", 1)[1])
    return default


def _learner_call(key: str, call: Callable[..., Any], *args: Any, placeholder: str, what: str,
                  **kwargs: Any) -> tuple[bool, Any]:
    """Run the learner's ``call(*args, **kwargs)``: ``(True, its value)``, or print why not: ``(False, None)``.

    The placeholder (``NotImplementedError``) prints ``placeholder``; any other exception is the learner's
    code failing: it is named with the first line of its message, and the notebook does not crash.
    """
    try:
        return True, call(*args, **kwargs)
    except NotImplementedError:
        print(f"[{key}] {placeholder}")
    except Exception as exc:  # the learner's code failed: say how, do not crash the notebook
        print(f"[{key}] not yet: your {what} raised {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}")
    return False, None


def steps_shown(run: Any) -> list[int]:
    """Steps per epoch that rank 0's Keras progress lines (``verbose=2``) report, one per epoch."""
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
    ``ceil(train_subset / (batch_size × workers))`` steps (the data was divided among the workers), as
    ``course_lib.training.epochs.epoch_arithmetic`` counts them.

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
    expected = epoch_arithmetic(_flag(command, "--train-subset", 60000), _flag(command, "--batch-size", 128),
                                workers)["steps_per_epoch"]
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
    import tensorflow as tf  # late: TensorFlow loads only when the check runs

    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    key = "02.replica_step"
    if strategy.num_replicas_in_sync < 2:
        print(f"[{key}] needs a strategy with at least 2 replicas, got {strategy.num_replicas_in_sync}.")
        return False
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(56, 28, 28, 1)).astype("float32")
    labels = rng.integers(0, 10, size=56)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(32)

    def small_model() -> Any:
        init = keras.initializers.GlorotUniform(seed=seed)
        return keras.Sequential([keras.layers.Flatten(input_shape=(28, 28, 1)),
                                    keras.layers.Dense(10, kernel_initializer=init)])

    reference = small_model()
    ref_opt = keras.optimizers.SGD(0.5)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for x, y in dataset:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, reference(x, training=True))
        ref_opt.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                    reference.trainable_variables))
    with strategy.scope():
        model = small_model()
        optimizer = keras.optimizers.SGD(0.5)

    def train() -> None:
        for x, y in strategy.experimental_distribute_dataset(dataset):
            strategy.run(replica_step, args=(model, optimizer, x, y))

    ran, _ = _learner_call(key, train, what="step", placeholder="not written yet — write my_replica_step in the "
                           "cell above and run both cells.")
    if not ran:
        return False
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(model.get_weights(), reference.get_weights()))
    if gap < 1e-5:
        print(f"[{key}] correct: two replicas give the weights of one device on the same images.")
        return True
    print(f"[{key}] not yet: the weights differ from one device's by up to {gap:.2g}. Hint: divide the sum of "
          "the per-example losses by the images of this step on ALL replicas (the last step is partial), "
          "then apply the gradients.")
    return False


def check_ring_allreduce(ring: Callable[[list[Any]], list[Any]], *, seed: int = 0) -> bool:
    """Self-check of the coding exercise of notebooks/01_data_parallelism.ipynb: finish a ring all-reduce.

    ``ring(arrays)`` is the learner's function: one 1-D array per worker in, one array per worker out.
    The check draws random arrays for 2, 3, 4 and 5 workers, of lengths that N divides and that it
    does not (uneven chunks), and wants every worker to end with the element-wise sum, computed here
    from the same arrays. An all-gather that adds instead of replacing, a wrong chunk index or a step
    too few leaves some worker with a wrong chunk, which the check names.

    Args:
        ring: The learner's function.
        seed: Seed of the arrays.

    Returns:
        True when every worker holds the sum for every N tried.
    """
    key = "01.ring_allreduce"
    rng = np.random.default_rng(seed)
    for workers in (2, 3, 4, 5):
        for length in (2 * workers, 2 * workers + 1):
            arrays = [rng.normal(size=length) for _ in range(workers)]
            expected = np.sum(arrays, axis=0)
            ran, results = _learner_call(key, ring, [a.copy() for a in arrays], what="ring",
                                         placeholder="not written yet — finish my_ring_allreduce in the cell "
                                         "above and run both cells.")
            if not ran:
                return False
            if results is None or len(results) != workers:
                print(f"[{key}] not yet: with {workers} workers your function returned "
                      f"{'nothing' if results is None else len(results)} arrays; return one per worker.")
                return False
            for w, got in enumerate(results):
                got = np.asarray(got, dtype=float)
                if got.shape != expected.shape or not np.allclose(got, expected):
                    bad = (np.flatnonzero(~np.isclose(got, expected)) if got.shape == expected.shape
                           else "its shape")
                    print(f"[{key}] not yet: with {workers} workers and arrays of {length}, worker {w} is wrong "
                          f"at positions {bad}. Hint: after the reduce-scatter worker w owns the finished chunk "
                          "(w + 1) mod N; in each all-gather step every worker passes on the finished chunk it "
                          "received last, and the receiver stores it as it is.")
                    return False
    print(f"[{key}] correct: every worker holds the sum, for 2 to 5 workers and uneven chunks.")
    return True


# ----------------------------------------------------------------- notebook 04: linear scaling + warm-up
LR_KEY = "04.lr_schedule"

#: Notebook 04: (base_lr, base_batch, batch, warmup_updates, updates checked)
LR_CASES: list[tuple[float, int, int, int, list[int]]] = [
    (0.01, 32, 256, 4, [0, 1, 2, 3, 4, 11]),
    (0.001, 32, 128, 8, [0, 3, 7, 8, 50]),
    (0.05, 64, 512, 0, [0, 9]),
]


def reference_rate(update: int, *, base_lr: float, base_batch: int, batch: int,
                   warmup_updates: int) -> float:
    """The rate of update ``update`` under the course's own schedule (TensorFlow's, evaluated).

    Introduced in notebooks/04_large_batch.ipynb.
    """
    peak = peak_lr({"base_lr": base_lr, "base_batch": base_batch, "batch": batch,
                    "lr_scaling": "linear"})
    if warmup_updates == 0:
        return peak
    schedule = schedules.linear_warmup(peak, warmup_updates, peak / base_lr)
    return float(schedule(update))


def _diagnose_lr(case: tuple[float, int, int, int], updates: list[int], got: list[float]) -> str:
    """A hint: which typical mistake reproduces ALL the learner's rates of this case."""
    base_lr, base_batch, batch, warmup = case
    peak, root = base_lr * batch / base_batch, base_lr * math.sqrt(batch / base_batch)

    def ramp(u: int, shift: int = 1) -> float:
        return min(u + shift, warmup) / warmup if warmup else 1.0

    mistakes: list[tuple[Callable[[int], float], str]] = [
        (lambda u: base_lr, "the rate never grows: scale base_lr by batch / base_batch (linear scaling rule)"),
        (lambda u: peak, "the rate must not jump to the scaled value at once: ramp up to it over warmup_updates "
                         "updates, starting from base_lr"),
        (lambda u: base_lr + (root - base_lr) * ramp(u),
         "this notebook's SGD recipe scales linearly (× batch / base_batch), not by the square root"),
        (lambda u: peak * ramp(u), "the ramp starts from the small-batch rate base_lr, not from 0: the small "
                                   "batch was already stable at that rate"),
        (lambda u: base_lr + (peak - base_lr) * ramp(u, shift=0),
         "update 0 is the first update and already takes one step of the ramp: at update u the ramp has done "
         "min(u + 1, warmup_updates) / warmup_updates of its way"),
    ]
    for wrong, hint in mistakes:
        if all(math.isclose(g, wrong(u), rel_tol=1e-4) for u, g in zip(updates, got)):
            return hint
    return ("the rate is base_lr + (base_lr × batch / base_batch − base_lr) × min(u + 1, warmup_updates) / "
            "warmup_updates, and base_lr × batch / base_batch without warm-up")


def check_lr_schedule(learning_rate: Callable[..., Any]) -> bool:
    """Print and return whether the learner's ``learning_rate`` matches the course's schedule.

    Args:
        learning_rate: ``learning_rate(update, *, base_lr, base_batch, batch, warmup_updates)``.

    Returns:
        True when every checked update agrees (relative 1e-5); a function that raises
        ``NotImplementedError`` (the placeholder) is "not attempted yet" and returns False.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    for base_lr, base_batch, batch, warmup, updates in LR_CASES:
        settings: dict[str, Any] = {"base_lr": base_lr, "base_batch": base_batch, "batch": batch,
                                    "warmup_updates": warmup}
        got: list[float] = []
        for update in updates:
            ran, value = _learner_call(LR_KEY, learning_rate, update, **settings, what="function",
                                       placeholder="not attempted yet — write my_learning_rate in the cell above "
                                       "and run both cells.")
            if not ran:
                return False
            try:
                got.append(float(value))
            except (TypeError, ValueError):
                print(f"[{LR_KEY}] not yet: return a number (the learning rate), got {value!r}.")
                return False
        expected = [reference_rate(update, **settings) for update in updates]
        wrong = [(u, g) for u, g, e in zip(updates, got, expected) if not math.isclose(g, e, rel_tol=1e-5)]
        if wrong:
            update, value = wrong[0]
            print(f"[{LR_KEY}] not yet: base_lr {base_lr}, batch {base_batch} -> {batch}, warmup_updates {warmup}: "
                  f"at update {update} your rate is {value:.6g}. "
                  f"Hint: {_diagnose_lr((base_lr, base_batch, batch, warmup), updates, got)}.")
            return False
    checked = sum(len(case[-1]) for case in LR_CASES)
    print(f"[{LR_KEY}] correct: your schedule gives the course's rate at all {checked} updates checked.")
    return True
