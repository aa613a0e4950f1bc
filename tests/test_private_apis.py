"""Private APIs the course relies on, named one by one, so that an upgrade fails loudly here.

Each test states what the course does with the private name and checks that the name still
behaves that way; a failure means "read the upgrade notes of that package and port the code named
in the test", not "skip the test".
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap

import pytest


def _run(code: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


#: test_autograph_rules_leave_horovod_unconverted_with_the_same_weights's check, run after the dropout checks in
#: their process (they need ``seeding.configure`` not yet called; this one calls it): it prints ``autograph:``,
#: then True (AutoGraph rewrote Horovod before the rule), 0 (nothing after) and True (the same weights).
_AUTOGRAPH = """
import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
from course_lib.training.keras2 import keras
from tensorflow.python.autograph.core import config
from tensorflow.python.autograph.impl import api, conversion
from course_lib.training import autograph

converted = []
original = api._convert_actual
def counting(entity, program_ctx):
    converted.append(getattr(entity, "__module__", "") or "")
    return original(entity, program_ctx)
api._convert_actual = counting

hvd.init()
import psutil  # test_in_process_hvd_init_starts_no_mpi_daemon's answer
print("children after hvd.init:", sorted(p.name() for p in psutil.Process().children(recursive=True)))
def train():
    converted.clear()
    seeding.configure(0)
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.001))
    model = models.compile_model(models.build_model(seed=0), opt)
    x = np.random.default_rng(0).random((256, 28, 28, 1), dtype=np.float32)
    model.fit(x, np.arange(256) % 10, batch_size=64, epochs=1, verbose=0, shuffle=False)
    return models.weights_digest(model), sum(m.startswith("horovod") for m in converted)

assert not conversion.is_allowlisted(hvd_tf.allreduce)
before, rewritten_before = train()
assert autograph.leave_horovod_unconverted() and autograph.leave_horovod_unconverted()
assert conversion.is_allowlisted(hvd_tf.allreduce)
assert sum(getattr(r, "_prefix", None) == "horovod" for r in config.CONVERSION_RULES) == 1, "one rule"
after, rewritten_after = train()
print("autograph:", rewritten_before > 0, rewritten_after, before == after)
"""


@pytest.fixture(scope="module")
def dropout_checks() -> subprocess.CompletedProcess:
    """One fresh process for both dropout tests and the AutoGraph test (issue 31; was one each): first the legacy
    RNG (``seeding.configure()`` not yet called), then the seeded generators after ``configure``, then
    :data:`_AUTOGRAPH`. Each part prints its own line; a failing dropout check prints why and lets the rest run."""
    return _run(textwrap.dedent("""
        import os; os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
        import numpy as np, tensorflow as tf
        from course_lib.training import models, seeding
        model = models.build_model(seed=0)   # seeding.configure() NOT called: legacy stateful RNG
        try:
            seeding.reseed_dropout(model, 0, 0)
        except seeding.SeedingError as exc:
            print("legacy: raised:", exc)
        else:
            print("legacy: reseeded silently")
        try:
            seeding.configure(0)
            model = models.build_model(seed=0)
            x = np.zeros((4, 28, 28, 1), np.float32)
            assert seeding.reseed_dropout(model, 0, 3) == 2, "both dropout layers must be reseeded"
            a = model(x + 1, training=True).numpy()
            seeding.reseed_dropout(model, 0, 3)
            b = model(x + 1, training=True).numpy()
            assert np.array_equal(a, b), "the same (seed, epoch) must draw the same dropout masks"
            seeding.reseed_dropout(model, 0, 4)
            c = model(x + 1, training=True).numpy()
            assert not np.array_equal(a, c), "another epoch must draw other masks"
        except Exception as exc:
            print("generator: failed:", type(exc).__name__, exc)
        else:
            print("generator: ok")
    """) + _AUTOGRAPH, timeout=480)  # the two processes' 240 s each: a loaded machine needs it


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_keras_dropout_generator_is_where_reseed_dropout_looks(dropout_checks) -> None:
    """course_lib.training.seeding.reseed_dropout resets ``layer._random_generator._generator``."""
    proc = dropout_checks
    assert "generator: ok" in proc.stdout.splitlines(), proc.stdout + proc.stderr[-3000:]


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_reseed_dropout_refuses_to_reseed_nothing(dropout_checks) -> None:
    """Without tf.random.Generator-backed dropout (Keras' legacy RNG), reseeding must not pass silently."""
    lines = dropout_checks.stdout.splitlines()
    assert lines and lines[0].startswith("legacy: raised:"), dropout_checks.stdout + dropout_checks.stderr[-3000:]


def test_tf_keras_seed_generator_holder_used_by_keras2() -> None:
    """course_lib.training.keras2 replaces tf_keras's ``backend._SEED_GENERATOR`` (a thread-local whose
    ``generator`` ``set_random_seed`` sets, and whose ``randint(1, 1e9)`` seeds unseeded layers)."""
    from tf_keras.src import backend
    from tf_keras.src.utils import tf_utils

    assert hasattr(backend, "_SEED_GENERATOR")
    assert "backend._SEED_GENERATOR.generator = random.Random(seed)" in inspect.getsource(tf_utils.set_random_seed)
    # tf_keras 2.18 passed the float 1e9 (a TypeError on Python >= 3.12, which keras2 works round); 2.21 passes
    # int(1e9) itself (keras-team/tf-keras#803 fixed), where keras2's generator draws the same numbers.
    source = inspect.getsource(backend.RandomGenerator._create_seed)
    assert ("_SEED_GENERATOR.generator.randint(1, 1e9)" in source
            or "_SEED_GENERATOR.generator.randint(1, int(1e9))" in source), source


def test_keras2_optimizer_internals_used_by_lars_and_lamb() -> None:
    """LARS/LAMB (course_lib.training.optimizers) use Keras 2's optimizer internals (tf_keras 2.18, as in 2.15):
    ``_var_key``, ``_index_dict`` (slot index of a variable), ``_serialize_hyperparameter`` and
    ``add_variable_from_reference``."""
    import tensorflow as tf

    from course_lib.training import optimizers

    opt = optimizers.LAMB(learning_rate=0.01)
    var = tf.Variable([[1.0, 2.0]], name="kernel")
    opt.build([var])
    for name in ("_var_key", "_index_dict", "_serialize_hyperparameter", "add_variable_from_reference"):
        assert hasattr(opt, name), f"Keras' optimizer lost {name}: port course_lib/training/optimizers.py"
    assert opt._var_key(var) in opt._index_dict, "Keras 2 keeps slot indices in _index_dict"
    assert opt.get_config()["learning_rate"] == pytest.approx(0.01)


def test_nbval_skip_compare_is_what_notebooks_conftest_extends() -> None:
    """tests/notebooks/harness.py wraps nbval's IPyNbFile.__init__ and extends ``skip_compare``."""
    import nbval.plugin

    source = inspect.getsource(nbval.plugin.IPyNbFile.__init__)
    assert "skip_compare" in source, "nbval no longer sets skip_compare in IPyNbFile.__init__"
    assert "skip_compare" in inspect.getsource(nbval.plugin.IPyNbCell.compare_outputs), (
        "nbval no longer reads skip_compare when comparing outputs")
    # tests/notebooks/harness.py checks each cell's stderr through these two.
    assert "test_outputs" in inspect.getsource(nbval.plugin.IPyNbCell.runtest)
    assert hasattr(nbval.plugin.IPyNbCell, "raise_cell_error")


@pytest.mark.horovod
def test_horovod_accumulation_counts_micro_steps_in_iterations() -> None:
    """Horovod 0.28.1's backward_passes_per_step increments ``optimizer.iterations`` at every
    micro-step (why course_lib.training.accumulation exists; tests/test_accumulation.py shows that
    Horovod's path is inexact for Adam/LAMB)."""
    import numpy as np

    import horovod.tensorflow.keras as hvd
    from course_lib.training.keras2 import keras

    hvd.init()  # in this process (issue 31; was a fresh one): one rank, no horovodrun
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(
        1, use_bias=False, kernel_initializer="ones")])
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=4,
                                   average_aggregated_gradients=True)
    model.compile(optimizer=opt, loss="mse")
    x, y = np.ones((4, 1), np.float32), np.zeros((4, 1), np.float32)
    model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0)  # 4 micro-batches
    iterations, value = int(opt.iterations.numpy()), float(model.get_weights()[0][0, 0])
    # d(w·1 - 0)²/dw = 2 at w = 1 for each micro-batch: ONE update of lr × mean(g) = 0.2.
    assert float(value) == pytest.approx(0.8), "4 accumulated passes must make ONE update"
    assert int(iterations) == 4, f"Horovod's accumulation counted {iterations} steps, not 4"


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_autograph_rules_leave_horovod_unconverted_with_the_same_weights(dropout_checks) -> None:
    """course_lib.training.autograph adds ``DoNotConvert("horovod")`` to ``autograph.core.config.CONVERSION_RULES``.

    Trains one model with Horovod's DistributedOptimizer before and after the rule, in one process (the dropout
    tests' process, after them: :data:`_AUTOGRAPH`): before, AutoGraph rewrites Horovod functions at the first
    step; after, none, and the weights are bit for bit the same.
    """
    proc = dropout_checks
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1].split() == ["autograph:", "True", "0", "True"], \
        proc.stdout + proc.stderr[-2000:]


@pytest.mark.requires("horovod")
@pytest.mark.slow  # > 2 s: left out of `make check`
def test_in_process_hvd_init_starts_no_mpi_daemon(dropout_checks) -> None:
    """Open MPI 4 forks an ``orted`` for an MPI singleton unless ``ess_singleton_isolated`` is set (tests/conftest.py
    sets it; the leftover check found the daemon). The ``hvd.init()`` of :data:`_AUTOGRAPH`, in a process that
    inherits this one's environment, starts no child (moved from tests/test_leftovers.py, issue 31: one TensorFlow
    process fewer)."""
    assert os.environ.get("OMPI_MCA_ess_singleton_isolated") == "1"
    lines = [line for line in dropout_checks.stdout.splitlines() if line.startswith("children after hvd.init:")]
    assert lines == ["children after hvd.init: []"], dropout_checks.stdout + dropout_checks.stderr[-3000:]
