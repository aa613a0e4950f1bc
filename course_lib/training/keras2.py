"""Keras 2 for the whole course: the one place that chooses which Keras ``tf.keras`` is.

TensorFlow >= 2.16 installs Keras 3 and makes it ``tf.keras``. The course stays on Keras 2 (the ``tf_keras``
package) because Horovod's Keras layer and MultiWorkerMirroredStrategy need it (horovod#4290, keras#20585;
docs/decisions/tensorflow-2.21.md). TensorFlow's switch is the environment variable ``TF_USE_LEGACY_KERAS=1``,
read the first time anything touches ``tf.keras``; this module sets it (inherited by every process this one
starts, so the ranks of a ``horovodrun`` see it too) and imports ``tf_keras``.

Every module, script and notebook of the course gets Keras from here, never from ``tensorflow`` or ``keras``
directly (tests/test_keras2.py checks it)::

    from course_lib.training.keras2 import keras
    model = keras.Sequential([...])

Importing this module imports TensorFlow (through ``tf_keras``); import it where TensorFlow is wanted.
"""

from __future__ import annotations

import os
import sys

LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
# Set before TensorFlow first resolves tf.keras (here, or in a process this one starts).
os.environ[LEGACY_KERAS_VARIABLE] = "1"

import random  # noqa: E402
import threading  # noqa: E402

import tf_keras as keras  # noqa: E402  (after the variable: the point of this module)
from tf_keras.src import backend as _tf_keras_backend  # noqa: E402


class _IntBoundsRandom(random.Random):
    """``random.Random`` whose ``randint`` takes tf_keras's float bound ``1e9`` as Python 3.11 did.

    tf_keras 2.18 draws each unseeded layer's seed with ``generator.randint(1, 1e9)`` once
    ``keras.utils.set_random_seed`` has run; Python 3.12 refuses a float there (TypeError). Upstream:
    keras-team/tf-keras#803, fix in PR #815 (unreleased). Same numbers as on 3.11 (int(1e9) bound).
    """

    def randint(self, a: int, b: int) -> int:  # tf_keras passes b = 1e9, a float, at run time
        return super().randint(int(a), int(b))


class _SeedGenerator(threading.local):
    """tf_keras's per-thread seed generator holder, handing out an ``_IntBoundsRandom`` in the same state."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "generator" and type(value) is random.Random:
            fixed = _IntBoundsRandom()
            fixed.setstate(value.getstate())
            value = fixed
        super().__setattr__(name, value)


# Private tf_keras API (tests/test_private_apis.py names it): set_random_seed assigns
# backend._SEED_GENERATOR.generator = random.Random(seed); the holder above converts it.
_tf_keras_backend._SEED_GENERATOR = _SeedGenerator()


def is_active() -> tuple[bool, str]:
    """Whether ``tf.keras`` is this ``keras`` (tf_keras, Keras 2), and a sentence saying what it is.

    False where TensorFlow resolved ``tf.keras`` to Keras 3 before this module set the variable (the
    variable was set too late, or ``TF_USE_LEGACY_KERAS`` was overridden).
    """
    import tensorflow as tf

    if tf.keras.Model is keras.Model:
        return True, f"tf.keras is tf_keras {keras.__version__} (Keras 2)"
    package = getattr(tf.keras.Model, "__module__", "?").split(".")[0]
    version = getattr(sys.modules.get(package), "__version__", "?")
    return False, f"tf.keras is {package} {version}, not tf_keras {keras.__version__}"


__all__ = ["keras", "is_active", "LEGACY_KERAS_VARIABLE"]
