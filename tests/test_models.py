"""Tests of course_lib.training.models: architecture, loss/output consistency, weight digests."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.training.keras2 import keras
import tensorflow as tf  # noqa: E402

from course_lib.training import models  # noqa: E402


def test_architecture_logits_and_softmax():
    logits = models.build_model(seed=0)
    probs = models.build_model(from_logits=False, seed=0)
    assert logits.input_shape == (None, 28, 28, 1)
    assert logits.output_shape == (None, 10)
    kinds = [type(layer).__name__ for layer in logits.layers]
    assert kinds == ["Conv2D", "Conv2D", "MaxPooling2D", "Dropout", "Flatten", "Dense", "Dropout",
                     "Dense"]
    assert models.output_is_logits(logits) and not models.output_is_logits(probs)
    out = probs(np.zeros((2, 28, 28, 1), np.float32)).numpy()
    assert np.allclose(out.sum(axis=1), 1.0, atol=1e-5)


def test_width_divides_the_convolutions_only():
    """Notebook 04's narrow CNN: the same layers, width-times fewer filters; Dense 128 and the output stay."""
    wide, narrow = models.build_model(seed=0), models.build_model(seed=0, width=4)
    assert [layer.filters for layer in narrow.layers[:2]] == [8, 16]
    assert [type(layer).__name__ for layer in narrow.layers] == [type(layer).__name__ for layer in wide.layers]
    assert narrow.layers[5].units == 128 and narrow.output_shape == (None, 10)
    assert narrow.name == "course_cnn_w4" and wide.name == "course_cnn"
    assert narrow.count_params() < wide.count_params() / 3
    with pytest.raises(ValueError, match="divisor of 32"):
        models.build_model(seed=0, width=3)


@pytest.mark.parametrize("model_logits", [True, False])
def test_loss_must_match_output(model_logits):
    model = models.build_model(from_logits=model_logits, seed=0)
    with pytest.raises(ValueError, match="from_logits"):
        models.compile_model(model, "sgd", from_logits=not model_logits)
    models.compile_model(model, "sgd", from_logits=model_logits)
    assert model.loss.get_config()["from_logits"] is model_logits


def test_compile_rejects_loss_override():
    with pytest.raises(ValueError, match="loss"):
        models.compile_model(models.build_model(seed=0), "sgd", loss="mse")


def test_digest_stable_and_sensitive():
    a, b = models.build_model(seed=3), models.build_model(seed=3)
    digest = models.weights_digest(a)
    assert len(digest) == 64 and digest == models.weights_digest(b)
    assert digest == models.weights_digest(a.get_weights())
    assert digest == models.weights_digest(a.weights)  # tf.Variables
    assert digest != models.weights_digest(models.build_model(seed=4))
    weights = a.get_weights()
    weights[-1] = weights[-1] + np.float32(1e-6)
    a.set_weights(weights)
    assert models.weights_digest(a) != digest


def test_mixed_precision_output_is_float32():
    model = models.build_model(mixed_precision=True, seed=0)
    assert model.layers[0].compute_dtype == "float16"
    assert model.layers[-1].compute_dtype == "float32"
    assert model(np.zeros((1, 28, 28, 1), np.float32)).dtype == tf.float32
    assert keras.mixed_precision.global_policy().name == "float32"  # no global side effect
