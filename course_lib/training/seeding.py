"""Seeds and determinism: one place that sets up reproducible training.

Both course scripts start the same way: op determinism when asked, one seed for Python, NumPy
and TensorFlow, and dropout masks drawn from a ``tf.random.Generator`` so that they can be reset
per epoch (:func:`reseed_dropout`) and a resumed run draws the masks of an uninterrupted one.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SeedingError", "configure", "reseed_dropout"]


class SeedingError(RuntimeError):
    """Dropout layers exist but none could be reseeded (Keras' private RNG layout changed)."""


def configure(seed: int, *, deterministic: bool = False, resumable_dropout: bool = True) -> None:
    """Seed Python, NumPy and TensorFlow, and make dropout masks resumable.

    Call it after ``hvd.init()`` / device set-up and before building the model.

    Args:
        seed: The run's seed.
        deterministic: Also enable TensorFlow op determinism (bit-identical reruns, slower).
        resumable_dropout: Draw dropout masks from ``tf.random.Generator`` (needed by
            :func:`reseed_dropout`; the MirroredStrategy script, which does not resume, keeps
            Keras' default).
    """
    import tensorflow as tf

    if deterministic:
        tf.config.experimental.enable_op_determinism()
    tf.keras.utils.set_random_seed(seed)
    if resumable_dropout:
        tf.keras.backend.experimental.enable_tf_random_generator()


def reseed_dropout(model: Any, seed: int, epoch: int) -> int:
    """Reset the ``tf.random.Generator`` of every dropout-like layer from ``(seed, epoch)``.

    With :func:`configure` called before the model is built, Keras layers draw their masks from a
    ``tf.random.Generator``. Resetting it at each epoch start makes the masks of epoch ``e``
    depend only on ``(seed, e, layer index)``, so a run resumed at epoch ``e`` draws exactly the
    masks of an uninterrupted run (the generators are not part of ``model.variables`` and Horovod
    does not broadcast them).

    This relies on a PRIVATE Keras 2 attribute (``layer._random_generator._generator``);
    ``tests/test_private_apis.py`` names it so that an upgrade fails loudly.

    Args:
        model: A Keras model.
        seed: The run's seed.
        epoch: 0-based epoch about to start.

    Returns:
        Number of generators reset (0 for a model without dropout-like layers).

    Raises:
        SeedingError: The model has dropout-like layers but none was reseeded: either
            :func:`configure` was not called before the model was built (legacy stateful RNG), or
            Keras no longer keeps the generator where this function looks.
    """
    count = 0
    random_layers = 0
    for index, layer in enumerate(model.layers):
        holder = getattr(layer, "_random_generator", None)
        if holder is None:
            continue
        random_layers += 1
        generator = getattr(holder, "_generator", None)
        if generator is not None and hasattr(generator, "reset_from_seed"):
            state = np.random.SeedSequence([int(seed), int(epoch), index]).generate_state(1)[0]
            generator.reset_from_seed(int(state))
            count += 1
    if random_layers and not count:
        raise SeedingError(
            f"{random_layers} dropout-like layer(s) but no tf.random.Generator to reseed: call "
            "course_lib.training.seeding.configure() before building the model (or Keras' private "
            "layer._random_generator._generator has moved: see tests/test_private_apis.py)")
    return count
