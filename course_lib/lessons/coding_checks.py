"""Self-checks of the coding exercises: they read what the learner's own code did, never a stored answer.

``check_ring_allreduce`` (notebooks/01_data_parallelism.ipynb) runs the learner's ring on arrays it draws;
``check_horovod_run`` (notebooks/03_horovod.ipynb) reads a Horovod run's output; ``check_replica_step``
(notebooks/02_mirrored_strategy.ipynb) runs the learner's replica step next to a one-device reference;
these three are re-exported by :mod:`course_lib.lessons.exercises`, where those notebooks import them.
``check_lr_schedule`` (notebooks/04_large_batch.ipynb) lives in :mod:`course_lib.lessons.schedule_check` and is
re-exported here, where notebook 04 imports it. Every check prints and returns its verdict the one way
:mod:`course_lib.lessons.selfcheck` defines.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from course_lib.lessons.schedule_check import LR_CASES, check_lr_schedule, reference_rate
from course_lib.lessons.selfcheck import learner_call, right, waiting, wrong
from course_lib.runner.runlog import parse_line
from course_lib.training.epochs import epoch_arithmetic

__all__ = ["check_horovod_run", "check_replica_step", "check_ring_allreduce", "steps_shown", "replica_weight_gap", "LR_CASES",
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
        return waiting(key, "not run yet", "run your script with launch.run_horovod, then this cell.")
    problems = []
    ranks = sorted(getattr(run, "digests", {}))
    if ranks != list(range(workers)):
        problems.append(f"digest lines came from ranks {ranks}, expected {list(range(workers))}: print the "
                        "digest on every rank, with its own rank (hvd.rank())")
    elif len(set(run.digests.values())) != 1:
        problems.append("the ranks ended with DIFFERENT weights: are the gradients averaged "
                        "(hvd.DistributedOptimizer) and rank 0's start broadcast before the first step "
                        "(hvd_tf.broadcast_variables, or hvd.callbacks.BroadcastGlobalVariablesCallback(0))?")
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
        return wrong(key, "\n- " + "\n- ".join(problems), "compare your script with the three things every "
                     "Horovod script does: one worker's share of the data, averaged gradients, one common start")
    return right(key, f"{workers} ranks with identical weights, {shown[0]} steps per epoch each")


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
    key = "02.replica_step"
    if strategy.num_replicas_in_sync < 2:
        return wrong(key, f"the check needs a strategy with at least 2 replicas, got {strategy.num_replicas_in_sync}.",
                     "pass the notebook's 2-replica `strategy`")
    ran, gap = learner_call(key, replica_weight_gap, replica_step, strategy, seed=seed, what="step",
                            placeholder="not written yet — write my_replica_step in the cell above and run both cells.")
    if not ran:
        return False
    if gap < 1e-5:
        return right(key, "two replicas give the weights of one device on the same images")
    return wrong(key, f"the weights differ from one device's by up to {gap:.2g}.", "which images does the mean "
                 "over one step run over, on ALL replicas (the last step is partial)? And were the gradients applied?")


def replica_weight_gap(replica_step: Callable[..., Any], strategy: Any, *, seed: int = 0, images: int = 56,
                       global_batch: int = 32) -> float:
    """How far a replica step's weights end from one device's: the largest absolute difference of any weight.

    A small model (one dense layer, plain SGD) is trained with ``strategy.run(replica_step, ...)`` over
    ``images`` random images in global batches of ``global_batch`` (56 in 32: a full step, then a partial one),
    and the same model on one device with the plain mean loss over the same images. Used by
    :func:`check_replica_step` (notebooks/02_mirrored_strategy.ipynb).

    Args:
        replica_step: ``replica_step(model, optimizer, images, labels)``, run on every replica.
        strategy: A ``tf.distribute`` strategy.
        seed: Seed of the weights and images.
        images: Images in the run.
        global_batch: Images per step on all replicas.

    Returns:
        The largest weight difference (0 up to float32 rounding when the two runs agree).
    """
    import tensorflow as tf  # late: TensorFlow loads only when the check runs

    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    rng = np.random.default_rng(seed)
    pixels = rng.normal(size=(images, 28, 28, 1)).astype("float32")
    labels = rng.integers(0, 10, size=images)
    dataset = tf.data.Dataset.from_tensor_slices((pixels, labels)).batch(global_batch)

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
    # The strategy's devices, reduced through one device: in notebook 02, eager collectives on its own strategy
    # (after its tf.function loop and keras.backend.clear_session) reused an instance key: a shape mismatch.
    strategy = tf.distribute.MirroredStrategy(list(strategy.extended.worker_devices),
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        model = small_model()
        optimizer = keras.optimizers.SGD(0.5)
    for x, y in strategy.experimental_distribute_dataset(dataset):
        strategy.run(replica_step, args=(model, optimizer, x, y))
    return max(float(np.max(np.abs(a - b))) for a, b in zip(model.get_weights(), reference.get_weights()))


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
            ran, results = learner_call(key, ring, [a.copy() for a in arrays], what="ring",
                                         placeholder="not written yet — finish my_ring_allreduce in the cell "
                                         "above and run both cells.")
            if not ran:
                return False
            if results is None or len(results) != workers:
                return wrong(key, f"with {workers} workers your function returned "
                             f"{'nothing' if results is None else len(results)} arrays.", "return one per worker")
            for w, got in enumerate(results):
                got = np.asarray(got, dtype=float)
                if got.shape != expected.shape or not np.allclose(got, expected):
                    bad = (np.flatnonzero(~np.isclose(got, expected)) if got.shape == expected.shape
                           else "its shape")
                    return wrong(key, f"with {workers} workers and arrays of {length}, worker {w} is wrong at "
                                 f"positions {bad}.", "trace N = 3 by hand: which chunk is finished on each worker "
                                 "after the reduce-scatter, which one does it send first, and does the receiver add "
                                 "it or keep it")
    return right(key, "every worker holds the sum, for 2 to 5 workers and uneven chunks")
