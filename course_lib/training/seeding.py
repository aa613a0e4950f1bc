"""Seeds and determinism: one place that sets up reproducible training.

Both course scripts start the same way: op determinism when asked, one seed for Python, NumPy
and TensorFlow, and dropout masks drawn from a ``tf.random.Generator`` so that they can be reset
per epoch (:func:`reseed_dropout`) and a resumed run draws the masks of an uninterrupted one.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SeedingError", "configure", "fix_cpu_threads", "reseed_dropout"]


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
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow
    import tensorflow as tf

    if deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(seed)
    if resumable_dropout:
        keras.backend.experimental.enable_tf_random_generator()


def fix_cpu_threads(threads: int = 2, *, hide_gpus: bool = True) -> None:
    """Run this process's TensorFlow on the CPU with thread pools of a fixed size.

    TensorFlow sizes its thread pools by the machine's cores, and the pool size decides how an
    op splits a sum between threads, so the last bits of the result, and after a few hundred
    updates the accuracies, depend on the core count: one notebook 04 trial reached validation
    accuracy 0.706 with 2 threads and 0.693 with 1, on the same CPU. With pools of a fixed size
    (and no GPU) the numbers are bit-identical on 1, 2 or 16 cores of the same CPU type, so a
    verdict drawn from them does not change with the machine; a CPU with other vector
    instructions (AVX-512 vs AVX2) can still change the last bits. On fewer cores than
    ``threads`` it is slower (the threads take turns), not different.

    Call it before TensorFlow's runtime starts (before the first op or device query).

    Args:
        threads: Size of the intra-op and of the inter-op pool, >= 1.
        hide_gpus: Also hide every GPU from TensorFlow (a GPU computes other last bits).

    Raises:
        ValueError: ``threads`` < 1.
        RuntimeError: The runtime already started with other settings: restart the kernel and
            call this first.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    import tensorflow as tf

    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    try:
        if hide_gpus:
            tf.config.set_visible_devices([], "GPU")
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as exc:   # already started: fine only if it is already so (a re-run cell)
        now = (tf.config.threading.get_intra_op_parallelism_threads(),
               tf.config.threading.get_inter_op_parallelism_threads())
        if now == (threads, threads) and not (hide_gpus and tf.config.get_visible_devices("GPU")):
            return
        raise RuntimeError(
            f"TensorFlow already started with intra/inter-op threads {now} and GPUs "
            f"{[d.name for d in tf.config.get_visible_devices('GPU')]}: fix_cpu_threads({threads}) "
            "must run before the first TensorFlow op. Restart the kernel and run the set-up cell "
            "first.") from exc


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
