"""Tests of course_lib.training.optimizers: LARS and LAMB against hand-written numpy references."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
from course_lib.training.keras2 import keras
import tensorflow as tf

from course_lib.training.optimizers import DEFAULT_EXCLUDE, LAMB, LARS, get_optimizer

RNG = np.random.default_rng(1234)
KERNEL0 = RNG.normal(size=(4, 3)).astype(np.float32)
BIAS0 = RNG.normal(size=(3,)).astype(np.float32)
GRADS = [
    (RNG.normal(size=(4, 3)).astype(np.float32), RNG.normal(size=(3,)).astype(np.float32))
    for _ in range(4)
]


def _variables() -> tuple[tf.Variable, tf.Variable]:
    return tf.Variable(KERNEL0, name="dense/kernel"), tf.Variable(BIAS0, name="dense/bias")


def _run(optimizer: keras.optimizers.Optimizer, steps: int) -> list[np.ndarray]:
    kernel, bias = _variables()
    for grad_k, grad_b in GRADS[:steps]:
        optimizer.apply_gradients([(tf.constant(grad_k), kernel), (tf.constant(grad_b), bias)])
    return [kernel.numpy(), bias.numpy()]


# ---------------------------------------------------------------- numpy references


def _lars_ref(steps: int, *, lr: float, momentum: float, eta: float, wd: float) -> list[np.ndarray]:
    """LARS, You et al. 2017 Alg. 1; the bias is excluded from decay and adaptation."""
    ws = [KERNEL0.astype(np.float64), BIAS0.astype(np.float64)]
    vs = [np.zeros_like(w) for w in ws]
    for grads in GRADS[:steps]:
        for i, (w, g) in enumerate(zip(ws, grads)):
            g = g.astype(np.float64)
            if i == 0:  # kernel: decay + trust ratio
                trust = eta * np.linalg.norm(w) / (np.linalg.norm(g) + wd * np.linalg.norm(w))
                g = g + wd * w
            else:  # bias: excluded
                trust = 1.0
            vs[i] = momentum * vs[i] + lr * trust * g
            ws[i] = w - vs[i]
    return ws


def _lamb_ref(
    steps: int, *, lr: float, b1: float, b2: float, eps: float, wd: float
) -> list[np.ndarray]:
    """LAMB, You et al. 2019 Alg. 2; the bias is excluded from decay and adaptation."""
    ws = [KERNEL0.astype(np.float64), BIAS0.astype(np.float64)]
    ms = [np.zeros_like(w) for w in ws]
    vs = [np.zeros_like(w) for w in ws]
    for t, grads in enumerate(GRADS[:steps], start=1):
        for i, (w, g) in enumerate(zip(ws, grads)):
            g = g.astype(np.float64)
            ms[i] = b1 * ms[i] + (1 - b1) * g
            vs[i] = b2 * vs[i] + (1 - b2) * g * g
            m_hat = ms[i] / (1 - b1**t)
            v_hat = vs[i] / (1 - b2**t)
            r = m_hat / (np.sqrt(v_hat) + eps)
            if i == 0:
                r = r + wd * w
                trust = np.linalg.norm(w) / np.linalg.norm(r)
            else:
                trust = 1.0
            ws[i] = w - lr * trust * r
    return ws


# ---------------------------------------------------------------- single / few steps


@pytest.mark.parametrize("wd", [0.0, 0.01])
@pytest.mark.parametrize("steps", [1, 3])
def test_lars_matches_numpy(wd: float, steps: int) -> None:
    got = _run(LARS(learning_rate=2.0, momentum=0.9, trust_coefficient=0.02, weight_decay=wd), steps)
    want = _lars_ref(steps, lr=2.0, momentum=0.9, eta=0.02, wd=wd)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # The update actually moved the kernel (the test could fail).
    assert not np.allclose(got[0], KERNEL0)


@pytest.mark.parametrize("wd", [0.0, 0.1])
@pytest.mark.parametrize("steps", [1, 3])
def test_lamb_matches_numpy(wd: float, steps: int) -> None:
    got = _run(LAMB(learning_rate=0.05, epsilon=1e-6, weight_decay=wd), steps)
    want = _lamb_ref(steps, lr=0.05, b1=0.9, b2=0.999, eps=1e-6, wd=wd)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_bias_exclusion_changes_the_update() -> None:
    """With no exclusion the bias gets a trust ratio too, so its update differs."""
    excluded = _run(LAMB(learning_rate=0.05, weight_decay=0.1), 1)[1]
    included = _run(LAMB(learning_rate=0.05, weight_decay=0.1, exclude_from_weight_decay=[]), 1)[1]
    assert not np.allclose(excluded, included)
    # Without exclusion, the bias update has relative size lr (trust = ||w|| / ||r||).
    step = np.linalg.norm(included - BIAS0) / np.linalg.norm(BIAS0)
    assert step == pytest.approx(0.05, rel=1e-4)


def test_zero_weights_give_trust_one() -> None:
    """||w|| = 0 -> trust ratio 1 (no NaN), for both optimizers."""
    for opt in (LARS(learning_rate=0.5, momentum=0.0), LAMB(learning_rate=0.5)):
        var = tf.Variable(np.zeros((2, 2), np.float32), name="dense/kernel")
        opt.apply_gradients([(tf.ones((2, 2)), var)])
        assert np.all(np.isfinite(var.numpy()))
        np.testing.assert_allclose(var.numpy(), -0.5 * np.ones((2, 2)), rtol=1e-4)


def test_default_exclusions_cover_bias_and_batch_norm() -> None:
    opt = LAMB(weight_decay=0.1)
    assert opt.exclude_from_weight_decay_patterns == list(DEFAULT_EXCLUDE)
    bias = tf.Variable([1.0], name="conv2d/bias")
    gamma = tf.Variable([1.0], name="batch_normalization/gamma")
    kernel = tf.Variable([1.0], name="conv2d/kernel")
    assert not opt.uses_weight_decay(bias) and not opt.uses_layer_adaptation(bias)
    assert not opt.uses_weight_decay(gamma)
    assert opt.uses_weight_decay(kernel) and opt.uses_layer_adaptation(kernel)


# ---------------------------------------------------------------- config, errors, wrapping


@pytest.mark.parametrize("cls", [LARS, LAMB])
def test_config_round_trip(cls: type) -> None:
    opt = cls(learning_rate=0.3, weight_decay=0.02, exclude_from_weight_decay=["bias"])
    config = opt.get_config()
    clone = cls.from_config(config)
    assert clone.get_config() == config
    assert clone.weight_decay == pytest.approx(0.02)
    assert clone.exclude_from_layer_adaptation_patterns == ["bias"]
    # And through the Keras registry-free deserialisation path.
    again = keras.optimizers.deserialize(
        keras.optimizers.serialize(opt), custom_objects={cls.__name__: cls}
    )
    assert type(again) is cls and again.get_config() == config


@pytest.mark.parametrize(
    "kwargs",
    [{"momentum": 1.0}, {"trust_coefficient": -1.0}, {"weight_decay": -0.1}],
)
def test_lars_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LARS(**kwargs)


def test_lamb_bad_arguments() -> None:
    with pytest.raises(ValueError, match="beta_2"):
        LAMB(beta_2=1.5)
    with pytest.raises(ValueError, match="Invalid exclusion pattern"):
        LAMB(exclude_from_weight_decay=["("])


def test_get_optimizer() -> None:
    assert isinstance(get_optimizer("lamb", 0.01), LAMB)
    assert isinstance(get_optimizer("LARS", 1.0), LARS)
    sgd = get_optimizer("sgd", 0.1)
    assert sgd.get_config()["momentum"] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="Unknown optimizer 'rmsprop'"):
        get_optimizer("rmsprop", 0.1)


@pytest.mark.requires("horovod")
@pytest.mark.parametrize("cls", [LARS, LAMB])
def test_horovod_distributed_optimizer_wraps(cls: type) -> None:
    """hvd.DistributedOptimizer rebuilds the optimizer from its config; the update must match."""
    import horovod.tensorflow.keras as hvd

    hvd.init()
    wrapped = hvd.DistributedOptimizer(cls(learning_rate=0.05, weight_decay=0.01))
    assert isinstance(wrapped, cls)
    got = _run(wrapped, 2)
    want = _run(cls(learning_rate=0.05, weight_decay=0.01), 2)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


# ---------------------------------------------------------------- trains a model


@pytest.mark.parametrize(
    "optimizer",
    [lambda: LARS(learning_rate=5.0, weight_decay=1e-4), lambda: LAMB(learning_rate=0.01)],
    ids=["lars", "lamb"],
)
def test_model_trains(optimizer) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype(np.float32)
    y = (x @ rng.normal(size=(8,)) > 0).astype(np.int32)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer=optimizer(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(x, y, batch_size=64, epochs=5, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_importing_tensorflow_modules_keeps_simulate_devices_working() -> None:
    """The premise of ordinary classes in TF-importing modules (optimizers, callbacks): importing
    TensorFlow does not initialise its devices; only the first op does."""
    import subprocess
    import sys

    code = (
        "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'\n"
        "from course_lib.training import callbacks, optimizers, devices\n"
        "print(len(devices.simulate_devices(2)))\n"
        "import tensorflow as tf\n"
        "tf.constant(1.0) + 1.0\n"  # the first op initialises the devices
        "try:\n"
        "    devices.simulate_devices(3)\n"
        "except devices.DevicesAlreadyInitializedError:\n"
        "    print('refused after the first op')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["2", "refused after the first op"], out.stderr[-2000:]
