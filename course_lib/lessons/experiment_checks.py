"""Self-checks of the "change the experiment" exercises (notebook 03).

In each, the learner changes one setting of an experiment the notebook runs, predicts what will happen, runs
it and answers with a word; the check compares that word with what the learner's own run measured (never with
a stored answer) and says what it means:

* ``03.broadcast`` (notebooks/03_horovod.ipynb): two Horovod workers start from their own seeds and rank 0's
  weights are not broadcast; do the ranks still end with the same weights (:func:`check_broadcast_experiment`)?

The verdict is deterministic: weight digests that are equal or not. Every check prints and returns its verdict the one way :mod:`course_lib.lessons.selfcheck` defines.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

from typing import Any

from course_lib.lessons.selfcheck import right, waiting, word_answer, wrong

__all__ = ["check_broadcast_experiment"]


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
