"""Keras 2 everywhere (issue 34): one module chooses Keras, and Horovod's Keras layer uses the same one.

course_lib/training/keras2.py sets TF_USE_LEGACY_KERAS=1 and imports tf_keras; every other module, script,
test and notebook takes ``keras`` from it. The two copy-to-your-cluster scripts (no course_lib) set the
variable themselves before TensorFlow loads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERAS2 = ROOT / "course_lib" / "training" / "keras2.py"
# Scripts that must run without course_lib (tests/test_minimal_script.py), or once their lines marked "# Course" are
# deleted (tests/test_script_diff.py): they import tf_keras themselves.
PRIVATE_APIS = ROOT / "tests" / "test_private_apis.py"
STANDALONE = {ROOT / "source_code" / name for name in ("keras_fmnist.py", "horovod_fmnist_minimal.py",
                                                        "mwms_fmnist.py", "horovod_fmnist_elastic.py")}
# Notebook 07's Keras 3 scripts: they run in .venv-07 (Keras 3 on JAX, no TensorFlow), where `import keras` is Keras 3
# on purpose; tests/test_frameworks_scripts.py runs them there.
KERAS3 = {ROOT / "source_code" / name for name in ("keras3_fmnist.py", "jax_fmnist.py")}

#: Ways of reaching Keras other than course_lib.training.keras2 (Keras 3, or tf_keras without the variable).
FORBIDDEN = re.compile(r"^\s*(from\s+tensorflow\s+import\s+keras\b|import\s+keras\b|from\s+keras\b"
                       r"|import\s+tensorflow\.keras\b|from\s+tensorflow\.keras\b|import\s+tf_keras\b"
                       r"|from\s+tf_keras\b)|\btf\.keras\.\w", re.M)


def forbidden_lines(text: str) -> list[str]:
    """The lines of ``text`` that reach Keras some other way than course_lib.training.keras2."""
    return [line.strip() for line in text.splitlines() if FORBIDDEN.search(line)]


def _sources() -> list[Path]:
    paths: list[Path] = []
    for folder in ("course_lib", "source_code", "benchmarks", "tests", "tools", "instructor", "notebooks"):
        paths.extend(p for p in (ROOT / folder).rglob("*.py") if ".ipynb_checkpoints" not in p.parts)
    return [p for p in paths if p not in (KERAS2, Path(__file__).resolve())]


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("line", [
    "from tensorflow import keras", "import keras", "from keras import backend as K", "import tf_keras as keras",
    "model = tf.keras.Sequential()", "from tensorflow.keras import layers", "    import keras.layers",
])
def test_the_scan_catches_other_ways_to_keras(line: str) -> None:
    assert forbidden_lines(f"import os\n{line}\n") == [line.strip()]


@pytest.mark.parametrize("line", [
    "from course_lib.training.keras2 import keras", "model = keras.Sequential()", "import horovod.tensorflow.keras as hvd",
    "# tf_keras is Keras 2 (a comment)",
])
def test_the_scan_lets_the_course_way_through(line: str) -> None:
    assert forbidden_lines(line) == []


def test_no_module_script_or_notebook_reaches_keras_another_way() -> None:
    bad = []
    for path in _sources():
        if path in STANDALONE or path in KERAS3:
            continue
        lines = forbidden_lines(path.read_text())
        if path == PRIVATE_APIS:  # names tf_keras's private modules on purpose (what keras2 relies on)
            lines = [line for line in lines if not line.startswith("from tf_keras.src")]
        bad.extend(f"{path.relative_to(ROOT)}: {line}" for line in lines)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        bad.extend(f"{path.relative_to(ROOT)}: {line}" for line in forbidden_lines(_notebook_code(path)))
    assert not bad, ("use `from course_lib.training.keras2 import keras` (Keras 2, tf_keras), not:\n"
                     + "\n".join(bad))


@pytest.mark.parametrize("path", sorted(STANDALONE), ids=lambda p: p.name)
def test_standalone_scripts_set_the_variable_before_tensorflow(path: Path) -> None:
    text = path.read_text()
    setting = text.find('os.environ["TF_USE_LEGACY_KERAS"] = "1"')
    assert setting != -1, f"{path.name} must set TF_USE_LEGACY_KERAS=1 (it runs without course_lib)"
    first_tf = min(i for i in (text.find("\nimport tensorflow"), text.find("\nimport horovod"),
                               text.find("\nimport tf_keras")) if i != -1)
    assert setting < first_tf, f"{path.name} sets TF_USE_LEGACY_KERAS after importing TensorFlow or Horovod"
    assert "import tf_keras as keras" in text


def _fresh(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_KERAS2_PROBE = """
import json, os, subprocess, sys
import horovod.tensorflow.keras as hvd
import horovod.tensorflow.keras.callbacks as cb
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('TF_USE_LEGACY_KERAS'))"],
                       capture_output=True, text=True).stdout.strip()
print(json.dumps({"active": is_active()[0], "keras": keras.__version__, "same_model": tf.keras.Model is keras.Model,
                  "cb_backend": cb.K.__name__, "has_set_value": hasattr(cb.K, "set_value"), "child": child}))
"""

#: test_set_random_seed_then_unseeded_layers_work_and_repeat's probe, run in the "keras2 first" process
#: (the state it needs: course_lib.training.keras2 imported first, in a fresh interpreter).
_SEED_PROBE = """
from tf_keras.src import backend
def weights():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dropout(0.5)])
    return model.layers[0].kernel.numpy().tolist()
try:  # a failure here is this probe's answer: the Keras 2 probe's line above stands
    first, second = weights(), weights()
    seeded = {"same": first == second, "generator": type(backend._SEED_GENERATOR.generator).__name__}
except Exception as exc:
    seeded = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(seeded))
"""


@pytest.fixture(scope="module")
def keras2_first() -> tuple[dict, dict]:
    """One fresh interpreter that imports course_lib.training.keras2 before TensorFlow: the Keras 2 probe's
    answer, then the seed probe's (two tests read it; each asserts its own property)."""
    code = ("from course_lib.training.keras2 import keras, is_active\nimport tensorflow as tf\n"
            + _KERAS2_PROBE + _SEED_PROBE)
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    keras2_line, seed_line = proc.stdout.strip().splitlines()[-2:]
    return json.loads(keras2_line), json.loads(seed_line)


@pytest.mark.slow  # > 2 s: left out of `make check`
@pytest.mark.parametrize("order", ["keras2 first", "tensorflow first"])
def test_keras2_makes_tf_keras_keras_2_and_horovod_callbacks_use_it(order: str, request: pytest.FixtureRequest) -> None:
    if order == "keras2 first":
        info = request.getfixturevalue("keras2_first")[0]
    else:
        info = _fresh("import tensorflow as tf\nfrom course_lib.training.keras2 import keras, is_active\n"
                      + _KERAS2_PROBE)
    assert info["active"] and info["same_model"], info
    assert info["keras"].startswith("2."), info
    assert info["cb_backend"].startswith("tf_keras") and info["has_set_value"], info  # the Horovod patch
    assert info["child"] == "1", info  # processes started from here (horovodrun's ranks) inherit it


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_without_the_variable_tf_keras_is_keras_3() -> None:
    """The control: what keras2 prevents (TensorFlow 2.18's tf.keras is Keras 3 by default)."""
    info = _fresh("import json, tensorflow as tf; print(json.dumps({'module': tf.keras.Model.__module__}))")
    assert not info["module"].startswith("tf_keras"), info


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_set_random_seed_then_unseeded_layers_work_and_repeat(keras2_first: tuple[dict, dict]) -> None:
    """tf_keras 2.18 draws unseeded layers' seeds with randint(1, 1e9), a TypeError on Python 3.12
    (tf-keras#803); keras2 hands it a generator that takes the float bound, in the same state."""
    assert keras2_first[1] == {"same": True, "generator": "_IntBoundsRandom"}
