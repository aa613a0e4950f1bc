"""The doctor's checks of Horovod and Keras 2: Horovod's build, the course's patch, and tf.keras being tf_keras.

Both are asked in a fresh interpreter (a stale Horovod build can crash on import, and Keras 2 must be chosen before
TensorFlow loads) by one probe that imports TensorFlow once: :func:`check_horovod_and_keras`, which
:func:`course_lib.environment.doctor.run_checks` calls. :func:`horovod_build_info` is the same question for
``tools/setup.sh``, which asks it after building Horovod.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from course_lib.environment.doctor_report import SETUP_HINT, Check, check_version, package_version, pin
from course_lib.runner.preflight import LaunchError, find_horovodrun

__all__ = ["check_horovod_and_keras", "horovod_build_info", "HOROVOD_PATCH_MARKER", "horovod_patch_in_place"]


#: Run in the course's interpreter: one import of Horovod's TensorFlow extension answers what
#: ``horovodrun --check-build`` answers for this course (it imports TensorFlow once per item, ≈14 s
#: on 2 cores; this ≈4 s). tests/test_environment.py checks that both agree on this machine.
_BUILD_PROBE = """
import json
try:
    import horovod.tensorflow as hvd
except Exception as exc:  # ImportError, or an undefined symbol in a stale build
    info = {"TensorFlow": False, "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
else:
    info = {"TensorFlow": True, "MPI": bool(hvd.mpi_built()), "Gloo": bool(hvd.gloo_built()),
            "NCCL": bool(hvd.nccl_built())}
print("HOROVOD_BUILD " + json.dumps(info))
"""


def horovod_build_info(python: str | None = None, timeout: float = 120.0) -> dict[str, bool | str]:
    """What Horovod was built with, as ``{"TensorFlow": True, "Gloo": True, "MPI": True, "NCCL": False}``.

    Imports ``horovod.tensorflow`` in a fresh interpreter (a stale build can crash on import) and asks
    it which controllers and operations are built in, as ``horovodrun --check-build`` does, in one
    import instead of one per item.

    Args:
        python: The interpreter to ask (default: this one, the course's .venv).
        timeout: Seconds to wait for the check.

    Returns:
        ``TensorFlow`` (whether Horovod's TensorFlow extension loads), and when it does ``MPI``, ``Gloo``
        and ``NCCL``; when it does not, ``error`` holds the first line of the import error. Empty when
        the interpreter could not be run or printed no answer.
    """
    return _answer(_probe_output(_BUILD_PROBE, python, timeout), "HOROVOD_BUILD ")


def _probe_output(code: str, python: str | None = None, timeout: float = 120.0) -> str:
    """The standard output of ``python -c code`` (default: the course's interpreter); empty if it did not run."""
    try:
        return subprocess.run([python or _probe_python(), "-c", code], capture_output=True, text=True,
                              timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _answer(stdout: str, prefix: str) -> dict:
    """The JSON object a probe printed after ``prefix`` (its last such line); empty when there is none."""
    answers = [line for line in stdout.splitlines() if line.startswith(prefix)]
    try:
        answer = json.loads(answers[-1].removeprefix(prefix)) if answers else {}
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


def _probe_python() -> str:
    return sys.executable


def _horovodrun_path() -> str | None:
    try:
        return find_horovodrun()
    except LaunchError:
        return None


def _check_horovod(gpus: list[str], probe: str | None = None) -> list[Check]:
    """Horovod's version and build; ``probe``: the output of :data:`_TF_PROBE` (default: run the build probe)."""
    version_check = check_version("Horovod", ("horovod",), "horovod")
    if version_check.status == "fail":
        return [version_check]
    if _horovodrun_path() is None:
        return [version_check, Check("Horovod build", "fail", "horovodrun (Horovod's launcher) not found",
                                     "rebuild it: COURSE_FORCE_SETUP=1 make setup")]
    info = horovod_build_info() if probe is None else _answer(probe, "HOROVOD_BUILD ")
    if not info:
        return [version_check, Check("Horovod build", "fail", "the check of Horovod's build did not run",
                                     "rebuild it: COURSE_FORCE_SETUP=1 make setup")]
    built = [name for name in ("TensorFlow", "Gloo", "MPI", "NCCL") if info.get(name) is True]
    checks = [version_check]
    detail = "built with " + ", ".join(built)
    if info.get("TensorFlow") is not True:
        checks.append(Check("Horovod build", "fail", f"horovod.tensorflow does not load ({info.get('error')})"
                            " — TensorFlow missing",
                            "rebuild after TensorFlow: COURSE_FORCE_SETUP=1 make setup"))
    elif not info.get("Gloo"):
        checks.append(Check("Horovod build", "fail", detail + " — Gloo missing",
                            "rebuild with HOROVOD_WITH_GLOO=1: COURSE_FORCE_SETUP=1 make setup (needs cmake)"))
    elif not info.get("MPI"):
        checks.append(Check("Horovod build", "warn", detail + " (no MPI controller: --gloo only)",
                            "sudo apt-get install -y libopenmpi-dev openmpi-bin, then COURSE_FORCE_SETUP=1 make setup"))
    elif gpus and not info.get("NCCL"):
        checks.append(Check("Horovod build", "warn", detail + " (GPUs present but no NCCL)",
                            "rebuild with HOROVOD_GPU_OPERATIONS=NCCL: COURSE_GPU=1 COURSE_FORCE_SETUP=1 make setup"))
    else:
        checks.append(Check("Horovod build", "ok", detail))
    return checks


#: A line that hunk 4 of requirements/patches/horovod-<version>.patch adds to Horovod's
#: ``horovod/tensorflow/keras/callbacks.py`` (tools/setup.sh checks the same line after its build).
HOROVOD_PATCH_MARKER = "K = keras.backend  # tf.keras's own backend"

#: Run in the course's interpreter: is ``tf.keras`` Keras 2 (tf_keras) once course_lib.training.keras2 is
#: imported, and do Horovod's Keras callbacks use that Keras's backend (the patch, at run time)?
_KERAS_PROBE = """
import json
info = {}
try:
    from course_lib.training.keras2 import is_active, keras
    info["keras2"], info["detail"] = is_active()
    import horovod.tensorflow.keras.callbacks as hvd_callbacks
    backend = hvd_callbacks.K
    info["horovod_backend"] = getattr(backend, "__name__", repr(backend))
    info["horovod_keras2"] = info["horovod_backend"].startswith("tf_keras") and hasattr(backend, "set_value")
except Exception as exc:
    info.setdefault("keras2", False)
    info["error"] = (str(exc).splitlines() or [type(exc).__name__])[0]
print("KERAS " + json.dumps(info))
"""


#: Both probes in one interpreter, run by :func:`run_checks`: TensorFlow is imported once, not twice (the
#: doctor's CPU time about halves; issue 31). The Keras probe comes first: course_lib.training.keras2 must set
#: TF_USE_LEGACY_KERAS before TensorFlow is imported, as it is in a learner's kernel.
_TF_PROBE = _KERAS_PROBE + _BUILD_PROBE


def horovod_patch_in_place() -> tuple[bool, str]:
    """Whether the installed Horovod carries the course's patch (its marker line), and the file read."""
    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        return False, "horovod is not installed"
    path = Path(list(spec.submodule_search_locations)[0]) / "tensorflow" / "keras" / "callbacks.py"
    try:
        return HOROVOD_PATCH_MARKER in path.read_text(), str(path)
    except OSError as error:
        return False, f"{path}: {error.strerror}"


def _check_keras2(horovod_ok: bool, probe: str | None = None) -> list[Check]:
    """Keras 2 (tf_keras) is tf.keras, and Horovod's Keras callbacks are patched to use it; ``probe``: the
    output of :data:`_TF_PROBE` (default: run the Keras probe)."""
    patch = Path("requirements") / "patches" / f"horovod-{pin('horovod') or package_version('horovod')}.patch"
    rebuild = f"COURSE_FORCE_SETUP=1 make setup (rebuilds Horovod with {patch} applied)"
    checks = []
    if horovod_ok:
        patched, where = horovod_patch_in_place()
        # The installed file, named from the package down (the venv's absolute path differs per machine).
        checks.append(Check("Horovod patch", "ok", f"{patch.name} applied in "
                            f"{Path(where).relative_to(Path(where).parents[3]).as_posix()}") if patched else
                      Check("Horovod patch", "fail", f"{where} lacks the course's patch: its Keras callbacks "
                            "would use Keras 3 and fail (horovod#4290)", rebuild))
    info = _answer(_probe_output(_KERAS_PROBE) if probe is None else probe, "KERAS ")
    if not info.get("keras2"):
        why = info.get("detail") or info.get("error") or "the check did not run"
        checks.append(Check("Keras 2", "fail", f"tf.keras is not tf_keras ({why})",
                            f"{SETUP_HINT}; import Keras only as `from course_lib.training.keras2 import keras` "
                            "(it sets TF_USE_LEGACY_KERAS=1 before TensorFlow resolves tf.keras)"))
    else:
        checks.append(Check("Keras 2", "ok", str(info.get("detail"))))
        if horovod_ok and not info.get("horovod_keras2"):
            why = info.get("error") or f"its callbacks use {info.get('horovod_backend')}"
            checks.append(Check("Horovod Keras callbacks", "fail", f"not on Keras 2 ({why})", rebuild))
    return checks



def check_horovod_and_keras(gpus: list[str]) -> list[Check]:
    """Horovod's version, build and patch, and Keras 2, from one probe (TensorFlow is imported once).

    Args:
        gpus: The machine's GPUs (a GPU machine without NCCL gets a warning).

    Returns:
        The checks, in the order the report prints them.
    """
    probe = _probe_output(_TF_PROBE)   # Horovod's build and Keras 2: one interpreter answers both
    horovod = _check_horovod(gpus, probe)
    return horovod + _check_keras2(all(check.status != "fail" for check in horovod), probe)
