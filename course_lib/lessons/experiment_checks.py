"""Self-checks of the "change the experiment" exercises of notebooks 02 and 03.

In each, the learner changes one setting of an experiment the notebook runs, predicts what will happen, runs
it and answers with a word; the check compares that word with what the learner's own run measured (never with
a stored answer) and says what it means:

* ``02.divisor`` (notebooks/02_mirrored_strategy.ipynb): each replica divides its summed loss by another
  number than the images of the whole step; do two replicas still give one device's weights
  (:func:`divisor_weight_gap`, :func:`check_divisor_experiment`)?
* ``03.broadcast`` (notebooks/03_horovod.ipynb): two Horovod workers start from their own seeds and rank 0's
  weights are not broadcast; do the ranks still end with the same weights (:func:`check_broadcast_experiment`)?

Both verdicts are deterministic: a weight gap of float32 rounding (below ``1e-5``) against one of the size of
an SGD step (above ``1e-3``; anything between is "cannot tell"), and weight digests that are equal or not.
Every check prints and returns its verdict the one way :mod:`course_lib.lessons.selfcheck` defines.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

from typing import Any

from course_lib.lessons.coding_checks import replica_weight_gap
from course_lib.lessons.selfcheck import right, waiting, word_answer, wrong

__all__ = ["DIVISOR_BATCH", "divisor_weight_gap", "check_divisor_experiment", "check_broadcast_experiment"]

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


def check_broadcast_experiment(answer: Any, *, run: Any) -> bool:
    """Self-check ``03.broadcast``: without the broadcast, do the ranks end with the ``same`` or ``different`` weights?

    Args:
        answer: ``"same"`` or ``"different"``; ``None``: not answered yet.
        run: The ``RunResult`` of the learner's 2-worker run (its ``command`` and per-rank ``digests`` are
            read); ``None``: not run yet.

    Returns:
        True when the word matches the digests the ranks printed.
    """
    key = "03.broadcast"
    if run is None:
        return waiting(key, "not run yet", "set SKIP_BROADCAST in the exercise's first cell and run the experiment.")
    command = [str(arg) for arg in getattr(run, "command", [])]
    if "--no-broadcast" not in command:
        return wrong(key, "your run still broadcast rank 0's weights: nothing was changed.",
                     "set the experiment's setting so that the broadcast is skipped, then rerun it")
    digests = dict(getattr(run, "digests", {}))
    if len(digests) < 2:
        return wrong(key, f"the run reported {len(digests)} rank's weights; two are needed.",
                     "did the run finish? Read its last lines")
    word = word_answer(key, answer, ("same", "different"))
    if word is None:
        return False
    measured = "same" if len(set(digests.values())) == 1 else "different"
    if word != measured:
        return wrong(key, f"the ranks did not end with {word} weights in your run.",
                     "compare the digests the run printed, then ask what the averaged gradient is added to")
    return right(key, f"the ranks ended with {measured} weights: " + (
        "every rank adds the SAME averaged gradient to its OWN start, so different starts stay different "
        "forever; the broadcast is what makes the workers one model" if measured == "different" else
        "their starts were already equal, so the averaged gradients kept them equal"))
