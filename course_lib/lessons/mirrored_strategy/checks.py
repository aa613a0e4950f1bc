"""Self-check of notebook 02's coding exercise: a custom training loop's replica step.

:func:`check_replica_step` (``02.replica_step``) runs the learner's replica step next to a one-device reference
computed here from the same images (:func:`replica_weight_gap`); nothing is stored. It prints and returns its
verdict the one way :mod:`course_lib.lessons.common.checks` defines.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from course_lib.lessons.common.checks import learner_call, right, wrong

__all__ = ["check_replica_step", "replica_weight_gap"]


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
