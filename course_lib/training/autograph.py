"""Start-up time: keep AutoGraph from rewriting Horovod's Python functions at every rank's first step.

The first ``model.fit`` step traces the training step into a graph. AutoGraph, which turns Python ``if`` and
``for`` on tensors into ``tf.cond`` and ``tf.while_loop``, rewrites every function the step calls, except
those of the packages it knows need no rewriting (TensorFlow's own, Keras, NumPy, ...). Horovod is not on
that list, so each rank parses and rewrites Horovod's ``DistributedOptimizer`` path (``allreduce``,
``_allreduce_cond``, the gradient grouping, the broadcast): about 200 rewrites, 2-3 s of one core per rank
on the course's 2-core machine, in every run. Horovod's code needs none of it: it was written for graph
mode (TensorFlow 1) and builds its conditions with ``tf.cond`` itself, so the graph is the same op for op
and the weights the same bit for bit (tests/test_private_apis.py trains one model both ways and compares).

Had a Horovod function a Python ``if`` on a tensor, graph mode would refuse it with an error at the first
step (never a silent change). The rule list is TensorFlow's private ``autograph.core.config``; where a
TensorFlow release moves it, :func:`leave_horovod_unconverted` does nothing and says so (``False``).

Used by the course's Horovod scripts (``source_code/horovod_fmnist.py``, ``horovod_fmnist_elastic.py``);
the copyable ``horovod_fmnist_minimal.py`` and the notebooks keep TensorFlow's default. No notebook teaches it:
it is start-up housekeeping (``source_code/README.md`` says what it saves).
"""

from __future__ import annotations

#: The packages whose functions AutoGraph leaves as they are, besides TensorFlow's own list.
UNCONVERTED_PACKAGES = ("horovod",)


def leave_horovod_unconverted(packages: tuple[str, ...] = UNCONVERTED_PACKAGES) -> bool:
    """Add ``packages`` to the front of AutoGraph's do-not-convert rules (once; later calls change nothing).

    Call it before the first ``model.fit`` (tracing reads the rules then).

    Args:
        packages: Top-level package names whose functions AutoGraph should call as they are.

    Returns:
        ``True`` when the rules hold the packages after the call, ``False`` when this TensorFlow has no
        rule list where the course looks for it (then nothing changed: runs are as slow as before, not wrong).
    """
    try:
        from tensorflow.python.autograph.core import config
    except ImportError:
        return False
    rules = getattr(config, "CONVERSION_RULES", None)
    do_not_convert = getattr(config, "DoNotConvert", None)
    if rules is None or do_not_convert is None:
        return False
    present = {getattr(rule, "_prefix", None) for rule in rules}
    added = tuple(do_not_convert(name) for name in packages if name not in present)
    config.CONVERSION_RULES = added + tuple(rules)  # read at each call (autograph.impl.conversion)
    return True


__all__ = ["UNCONVERTED_PACKAGES", "leave_horovod_unconverted"]
