"""Self-check of the "change the experiment" exercise of notebook 02.

In each, the learner changes one setting of an experiment the notebook runs, predicts what will happen, runs
it and answers with a word; the check compares that word with what the learner's own run measured (never with
a stored answer) and says what it means:

* ``02.divisor`` (notebooks/02_mirrored_strategy.ipynb): each replica divides its summed loss by another
  number than the images of the whole step; do two replicas still give one device's weights
  (:func:`divisor_weight_gap`, :func:`check_divisor_experiment`)?
The verdict is deterministic: a weight gap of float32 rounding (below ``1e-5``) against one of the size of
an SGD step (above ``1e-3``; anything between is "cannot tell").
Every check prints and returns its verdict the one way :mod:`course_lib.lessons.selfcheck` defines.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

from typing import Any

from course_lib.lessons.coding_checks import replica_weight_gap
from course_lib.lessons.selfcheck import right, waiting, word_answer, wrong

__all__ = ["DIVISOR_BATCH", "divisor_weight_gap", "check_divisor_experiment"]

#: Images per step (on all replicas) of the divisor experiment: two full steps, no partial one.
DIVISOR_BATCH = 32
AGREE_BELOW, DIFFER_ABOVE = 1e-5, 1e-3   # float32 rounding / an SGD step's size


def divisor_weight_gap(strategy: Any, divide_by: float, *, seed: int = 0) -> float:
    """Train with each replica's summed loss divided by ``divide_by``; how far do the weights end from one device's?

    Two full global batches of :data:`DIVISOR_BATCH` images, split between the strategy's replicas, with plain
    SGD (:func:`course_lib.lessons.coding_checks.replica_weight_gap`); the one-device reference takes the mean
    loss over the same images.

    Args:
        strategy: A ``tf.distribute`` strategy (notebook 02's, with 2 replicas).
        divide_by: The number each replica divides the sum of its per-example losses by.
        seed: Seed of the weights and images.

    Returns:
        The largest absolute difference of any weight.
    """
    import tensorflow as tf  # late: TensorFlow loads only when the experiment runs

    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def divided_step(model: Any, optimizer: Any, images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            summed = tf.reduce_sum(per_example(labels, model(images, training=True)))
            loss = summed / float(divide_by)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return replica_weight_gap(divided_step, strategy, seed=seed, images=2 * DIVISOR_BATCH,
                              global_batch=DIVISOR_BATCH)


def check_divisor_experiment(answer: Any, *, divide_by: float | None, gap: float | None) -> bool:
    """Self-check ``02.divisor``: with the loss divided by ``divide_by``, do the weights ``agree`` or ``differ``?

    Args:
        answer: ``"agree"`` or ``"differ"`` (with one device's weights); ``None``: not answered yet.
        divide_by: The divisor of the learner's run; ``None``: not run yet.
        gap: :func:`divisor_weight_gap` of that run.

    Returns:
        True when the word matches what the learner's run measured.
    """
    key = "02.divisor"
    if divide_by is None or gap is None:
        return waiting(key, "not run yet", "set DIVIDE_BY in the exercise's first cell and run the experiment.")
    if divide_by == DIVISOR_BATCH:
        return wrong(key, f"your run divided by {divide_by:g}, as the custom loop does: nothing was changed.",
                     "change the divisor to another number of images, then rerun the experiment")
    word = word_answer(key, answer, ("agree", "differ"))
    if word is None:
        return False
    if AGREE_BELOW <= gap <= DIFFER_ABOVE:
        return wrong(key, f"the gap {gap:.2g} is between rounding and a real difference: this run cannot tell.",
                     "choose a divisor further from the one of the custom loop")
    measured = "agree" if gap < AGREE_BELOW else "differ"
    if word != measured:
        return wrong(key, f"the weights did not {word} in your run.",
                     "read the gap the experiment printed, then ask what the all-reduce does with the replicas' "
                     "gradients: average them or add them")
    return right(key, f"the weights {measured} with one device's in your run: " + (
        "the all-reduce ADDS the replicas' gradients, so only the images of the whole step give their mean; "
        "any other divisor scales every SGD step" if measured == "differ" else
        "this divisor gave the mean over the step's images"))
