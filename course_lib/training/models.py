"""The course CNN, its matching loss, and a digest of its weights.

The loss must match the model's output: logits need
``SparseCategoricalCrossentropy(from_logits=True)``, a softmax output needs
``from_logits=False``. Mixing them up still trains, just worse and silently (the bug of the
reference course, OpenHackathons' gpubootcamp "Introduction to Distributed Deep Learning",
https://github.com/openhackathons-org/gpubootcamp/tree/master/ai/Distributed_Deep_Learning);
:func:`compile_model` refuses the mismatch.

Introduced in notebooks/01_data_parallelism.ipynb.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from course_lib.training.keras2 import keras  # type hints only (keras2 imports TensorFlow)

__all__ = ["INPUT_SHAPE", "build_model", "compile_model", "output_is_logits", "weights_digest"]

INPUT_SHAPE = (28, 28, 1)


def build_model(*, from_logits: bool = True, mixed_precision: bool = False,
                seed: int | None = None, num_classes: int = 10, width: int = 1) -> "keras.Model":
    """Build the course CNN (not compiled).

    Conv2D 32 (3x3, relu) → Conv2D 64 (3x3, relu) → MaxPool 2 → Dropout 0.25 → Flatten →
    Dense 128 relu → Dropout 0.5 → Dense 10 (logits, or softmax when ``from_logits=False``).
    ``width`` divides the filters of the two convolutions (the same layers, ``width``² times fewer
    multiplications in the second one, which dominates): notebook 04's many short runs use a narrower CNN.

    Args:
        from_logits: Output logits (True) or probabilities (False).
        mixed_precision: Compute in float16 (``mixed_float16`` policy on the layers); the last
            layer and the softmax compute in float32 so the loss stays stable.
        seed: Seed of the weight initialisers (and dropout); None gives random weights.
        num_classes: Number of outputs.
        width: Divisor of the convolutions' filters (1: the course CNN; it must divide 32).

    Returns:
        A ``keras.Sequential`` model named ``"course_cnn"`` (``"course_cnn_w{width}"`` when narrower).

    Raises:
        ValueError: ``width`` is not a positive divisor of 32.
    """
    if width < 1 or 32 % width:
        raise ValueError(f"width must be a positive divisor of 32 (the first layer's filters), got {width}")
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    layers = keras.layers
    policy = "mixed_float16" if mixed_precision else None

    def init(offset: int) -> Any:
        if seed is None:
            return "glorot_uniform"
        return keras.initializers.GlorotUniform(seed=seed + offset)

    def dropout_seed(offset: int) -> int | None:
        return None if seed is None else seed + offset

    kw = {"dtype": policy} if policy else {}
    model = keras.Sequential(
        [
            keras.Input(shape=INPUT_SHAPE),
            layers.Conv2D(32 // width, 3, activation="relu", kernel_initializer=init(0), **kw),
            layers.Conv2D(64 // width, 3, activation="relu", kernel_initializer=init(1), **kw),
            layers.MaxPooling2D(2, **kw),
            layers.Dropout(0.25, seed=dropout_seed(2), **kw),
            layers.Flatten(**kw),
            layers.Dense(128, activation="relu", kernel_initializer=init(3), **kw),
            layers.Dropout(0.5, seed=dropout_seed(4), **kw),
            layers.Dense(num_classes, activation=None if from_logits else "softmax",
                         kernel_initializer=init(5), dtype="float32", name="output"),
        ],
        name="course_cnn" if width == 1 else f"course_cnn_w{width}",
    )
    return model


def output_is_logits(model: "keras.Model") -> bool:
    """Whether the model's last layer outputs logits (no softmax/sigmoid activation).

    Args:
        model: A Keras model whose last layer has an ``activation`` attribute, or is a
            ``Softmax``/``Activation`` layer.

    Returns:
        True for a linear last activation, False for softmax (or sigmoid).
    """
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    last = model.layers[-1]
    if isinstance(last, keras.layers.Softmax):
        return False
    activation = getattr(last, "activation", None)
    name = getattr(activation, "__name__", str(activation)) if activation is not None else "linear"
    return name not in ("softmax", "sigmoid")


def compile_model(model: "keras.Model", optimizer: Any, *, from_logits: bool = True,
                  **compile_kwargs: Any) -> "keras.Model":
    """Compile ``model`` with the sparse cross-entropy that matches its output, and accuracy.

    Args:
        model: The model, e.g. from :func:`build_model`.
        optimizer: A Keras optimizer (or a Horovod ``DistributedOptimizer``), or its name.
        from_logits: Must say what the model outputs (True: logits, False: probabilities).
        **compile_kwargs: Passed to ``model.compile`` (not ``loss``/``metrics``).

    Returns:
        The same model, compiled.

    Raises:
        ValueError: ``from_logits`` disagrees with the model's last activation, or ``loss`` /
            ``metrics`` were passed in ``compile_kwargs``.
    """
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    if "loss" in compile_kwargs or "metrics" in compile_kwargs:
        raise ValueError("compile_model sets loss and metrics itself; call model.compile directly "
                         "for a different loss")
    logits = output_is_logits(model)
    if logits != from_logits:
        what = "logits (no softmax)" if logits else "probabilities (softmax)"
        raise ValueError(
            f"The model outputs {what} but from_logits={from_logits}: the loss would be wrong. "
            f"Pass from_logits={logits}, or build the model with build_model(from_logits={from_logits})."
        )
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits),
        metrics=["accuracy"],
        **compile_kwargs,
    )
    return model


def weights_digest(model_or_weights: Any) -> str:
    """sha256 hex digest of the weights, in order (dtype, shape and raw bytes of each array).

    Ranks that hold identical weights print identical digests.

    Args:
        model_or_weights: A Keras model (``get_weights()`` is used) or a list of arrays/tensors.

    Returns:
        64 hexadecimal characters.
    """
    if hasattr(model_or_weights, "get_weights"):
        weights: Iterable[Any] = model_or_weights.get_weights()
    else:
        weights = model_or_weights
    digest = hashlib.sha256()
    for w in weights:
        array = np.ascontiguousarray(w.numpy() if hasattr(w, "numpy") else np.asarray(w))
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
