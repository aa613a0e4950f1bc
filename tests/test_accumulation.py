"""course_lib.training.accumulation: k micro-batches of size b = one step of size k·b, exactly.

The same comparison run against Horovod 0.28.1's own accumulation
(``DistributedOptimizer(backward_passes_per_step=k)``) must FAIL for Adam and LAMB: Horovod
advances ``optimizer.iterations`` at every micro-step, and their bias correction reads it.
"""

from __future__ import annotations

import functools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
from course_lib.training.keras2 import keras
import tensorflow as tf

from course_lib.training import accumulation
from course_lib.training.optimizers import get_optimizer

MICRO, K, RTOL = 8, 4, 1e-5
RATES = {"sgd": 0.05, "adam": 0.01, "lars": 1.0, "lamb": 0.01}
tf.config.experimental.enable_op_determinism()


def _model(seed: int = 3) -> keras.Model:
    """A small model without dropout (a real k·b batch draws other masks than k micro-batches)."""
    init = keras.initializers.GlorotUniform(seed=seed)
    model = keras.Sequential([
        keras.layers.Conv2D(4, 3, activation="relu", kernel_initializer=init,
                               input_shape=(8, 8, 1)),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu", kernel_initializer=init),
        keras.layers.Dense(3, kernel_initializer=init)])
    return model


def _data(updates: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(updates)
    x = rng.normal(size=(updates * K * MICRO, 8, 8, 1)).astype(np.float32)
    return x, rng.integers(0, 3, size=len(x)).astype(np.int32)


UPDATES = 10  # the longest run; a shorter one trains on the first updates of the same data


def _train(name: str, updates: int, path: str) -> dict[int, tuple[list[np.ndarray], int]]:
    """Weights and ``optimizer.iterations`` after each of ``updates`` updates of a K·MICRO batch.

    path: ``"large"`` (real batches of K·MICRO), ``"course"`` (K accumulated micro-batches,
    course_lib) or ``"horovod"`` (K micro-batches, Horovod's backward_passes_per_step).
    Returns {update number: (weights, iterations)}, taken at the end of the update's last (micro-)batch.
    """
    model = _model()
    optimizer = get_optimizer(name, RATES[name])
    if path == "horovod":
        import horovod.tensorflow.keras as hvd

        hvd.init()
        optimizer = hvd.DistributedOptimizer(optimizer, backward_passes_per_step=K,
                                             average_aggregated_gradients=True)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if path == "course":
        accumulation.accumulate_gradients(model, K)
    per_update = 1 if path == "large" else K
    after: dict[int, tuple[list[np.ndarray], int]] = {}

    class AfterEachUpdate(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if (batch + 1) % per_update == 0:
                after[(batch + 1) // per_update] = ([w.numpy().copy() for w in model.trainable_variables],
                                                    int(optimizer.iterations.numpy()))

    x, y = _data(UPDATES)
    n = updates * K * MICRO
    model.fit(x[:n], y[:n], batch_size=K * MICRO if path == "large" else MICRO, epochs=1, shuffle=False,
              verbose=0, callbacks=[AfterEachUpdate()])
    assert sorted(after) == list(range(1, updates + 1))
    return after


@functools.lru_cache(maxsize=None)
def _run(name: str, path: str, updates: int = UPDATES) -> dict[int, tuple[list[np.ndarray], int]]:
    """One training run per (optimizer, path, length), shared by every test that reads it (issue 31: the
    1-update tests read the first update of the 10-update runs, which were separate runs on other data;
    Horovod's tests reuse the course's large-batch reference)."""
    return _train(name, updates, path)


def _assert_same_as_large_batch(name: str, updates: int, path: str, run_updates: int = UPDATES) -> None:
    want, want_iterations = _run(name, "large")[updates]
    got, got_iterations = _run(name, path, run_updates)[updates]
    assert want_iterations == updates
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-7,
                                   err_msg=f"{name}, {updates} updates, path {path}")
    assert got_iterations == updates, f"optimizer.iterations {got_iterations} != {updates} updates"


# 1 update (the first, from fresh slots) and 10 (the step counter and slots carried across updates), read
# from one run of 10 updates per optimizer and path; 2 updates were also run until issue 31: any error at the
# 2nd update shows in the 10-update run too.
@pytest.mark.parametrize("updates", [1, 10])
@pytest.mark.parametrize("name", ["sgd", "adam", "lars", "lamb"])
def test_accumulation_equals_one_large_batch(name: str, updates: int) -> None:
    _assert_same_as_large_batch(name, updates, "course")


@pytest.mark.horovod
@pytest.mark.parametrize("name", ["adam", "lamb"])
def test_the_same_test_fails_on_horovods_accumulation(name: str) -> None:
    """The exactness test above, run on Horovod's accumulation: it must fail for Adam and LAMB."""
    with pytest.raises(AssertionError):
        _assert_same_as_large_batch(name, 10, "horovod")


@pytest.mark.horovod
def test_horovods_accumulation_is_exact_for_sgd_weights_only() -> None:
    """SGD never reads the step counter: Horovod's weights match, its counter does not."""
    with pytest.raises(AssertionError, match="optimizer.iterations"):
        _assert_same_as_large_batch("sgd", 2, "horovod", run_updates=2)


def test_partial_accumulation_waits_and_counter_counts_updates() -> None:
    model = _model()
    model.compile(optimizer=get_optimizer("adam", 0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    acc = accumulation.accumulate_gradients(model, K)
    before = [w.numpy().copy() for w in model.trainable_variables]
    x, y = _data(1)
    model.fit(x[:(K - 1) * MICRO], y[:(K - 1) * MICRO], batch_size=MICRO, shuffle=False, verbose=0)
    assert all(np.array_equal(b, w.numpy()) for b, w in zip(before, model.trainable_variables))
    assert int(model.optimizer.iterations.numpy()) == 0 and int(acc.micro_steps.numpy()) == K - 1
    model.fit(x[:MICRO], y[:MICRO], batch_size=MICRO, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 1
    assert not np.array_equal(before[0], model.trainable_variables[0].numpy())
    assert all(not np.any(s.numpy()) for s in acc.sums), "the accumulator is cleared after an update"


def test_all_reduce_is_called_once_per_update() -> None:
    calls = []

    def all_reduce(grads):
        calls.append(len(grads))
        return grads

    model = _model()
    model.compile(optimizer=get_optimizer("sgd", 0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    accumulation.accumulate_gradients(model, K, all_reduce=all_reduce)
    x, y = _data(3)
    model.fit(x, y, batch_size=MICRO, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 3
    assert calls == [len(model.trainable_variables)], "traced once, inside the update branch"


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="compile the model"):
        accumulation.accumulate_gradients(_model(), 2)
    model = _model()
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match=">= 1"):
        accumulation.accumulate_gradients(model, 0)


def test_horovod_wrapped_optimizer_is_refused() -> None:
    """In this process (issue 31; was a fresh one): hvd.init() without horovodrun is one rank."""
    import horovod.tensorflow.keras as hvd

    hvd.init()
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    with pytest.raises(ValueError, match=r"the optimizer is wrapped by hvd\.DistributedOptimizer"):
        accumulation.accumulate_gradients(model, 2)


# The script's accumulation under horovodrun -np 2 (same weights on both ranks, an update every k-th
# micro-step, the accumulated global batch, no process left) is proven by one launch in
# tests/test_scripts.py::test_two_workers_accumulate_every_kth_micro_step_and_stay_identical (issue 31).
