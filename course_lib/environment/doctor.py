"""Environment check: ``python -m course_lib doctor``.

Checks everything the course needs and prints a short report, one line per item; each missing
piece gets one line with the exact remedy. The exit status is non-zero when something the course
needs is missing (warnings, such as "no GPU", do not fail).

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet

from course_lib.environment import tensorflow_build
from course_lib.environment.frameworks import frameworks_venv, frameworks_versions
from course_lib.runner.preflight import LaunchError, find_horovodrun
from course_lib.training import fmnist_files
from course_lib.training.machine.hardware import cpu_cores, gpu_names
from course_lib.training.files import course_root

__all__ = ["Check", "DoctorReport", "run_checks", "horovod_build_info", "package_version"]

SETUP_HINT = "run `make setup` in the course folder (it installs the pinned stack into .venv)"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report.

    Attributes:
        name: What was checked, e.g. ``"TensorFlow"``.
        status: ``"ok"``, ``"warn"`` (works, but worth knowing) or ``"fail"`` (the course needs it).
        detail: What was found.
        remedy: The exact command or step that fixes a failure or warning ("" when ok).
    """

    name: str
    status: str
    detail: str
    remedy: str = ""

    def line(self) -> str:
        """The report line: status tag, name, detail, and ``→ remedy`` where there is one."""
        tag = {"ok": "  ok", "warn": "warn", "fail": "FAIL"}[self.status]
        text = f"[{tag}] {self.name}: {self.detail}"
        return f"{text}\n       → {self.remedy}" if self.remedy else text


@dataclass
class DoctorReport:
    """All checks, in order. ``ok`` is False when any check failed."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.status != "fail" for check in self.checks)

    def text(self) -> str:
        """The printed report, ending with a one-line verdict."""
        lines = [check.line() for check in self.checks]
        failed = [c.name for c in self.checks if c.status == "fail"]
        lines.append("Verdict: ready for the course." if not failed
                     else f"Verdict: NOT ready — fix: {', '.join(failed)}.")
        return "\n".join(lines)


def package_version(*dists: str) -> str | None:
    """Installed version of the first of ``dists`` that is installed, or None (nothing is imported)."""
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _pin(name: str) -> str | None:
    """The pinned version of ``name`` from requirements/constraints.txt, when the file is present."""
    constraints = course_root() / "requirements" / "constraints.txt"
    if not constraints.is_file():
        return None
    pattern = re.compile(rf"^{re.escape(name)}==(\S+)", re.IGNORECASE)
    for raw in constraints.read_text().splitlines():
        match = pattern.match(raw.strip())
        if match:
            return match.group(1)
    return None


def _check_version(name: str, dists: tuple[str, ...], pin_name: str) -> Check:
    found = package_version(*dists)
    wanted = _pin(pin_name)
    if found is None:
        return Check(name, "fail", "not installed", SETUP_HINT)
    if wanted and found != wanted:
        return Check(name, "fail", f"{found} installed, the course is tested with {wanted}",
                     f"{SETUP_HINT} (or: pip install -c requirements/constraints.txt {pin_name}=={wanted})")
    return Check(name, "ok", found)


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


def _supported_pythons() -> str:
    """The course's Python range, ``requires-python`` of pyproject.toml (the one place it is written), e.g.
    ``">=3.11,<3.14"``; empty when pyproject.toml cannot be read."""
    try:
        return str(tomllib.loads((course_root() / "pyproject.toml").read_text())["project"]["requires-python"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return ""


def _check_python() -> Check:
    version = sys.version.split()[0]
    course_venv = (course_root() / ".venv").resolve()   # a symlinked .venv (a worktree's) is still the course's
    where = "the course's .venv" if Path(sys.prefix).resolve() == course_venv else sys.prefix
    text = f"{version} ({where})"
    supported = _supported_pythons()
    if not supported:
        return Check("Python", "warn", text, "pyproject.toml's requires-python could not be read")
    if not SpecifierSet(supported).contains(version, prereleases=True):
        return Check("Python", "fail", text, f"the course needs Python {supported} (pyproject.toml): "
                     "run `make setup` and use the course kernel / .venv/bin/python")
    return Check("Python", "ok", text)


def _check_horovod(gpus: list[str], probe: str | None = None) -> list[Check]:
    """Horovod's version and build; ``probe``: the output of :data:`_TF_PROBE` (default: run the build probe)."""
    version_check = _check_version("Horovod", ("horovod",), "horovod")
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
    patch = Path("requirements") / "patches" / f"horovod-{_pin('horovod') or package_version('horovod')}.patch"
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


def _check_tensorflow_build(builds: dict[str, str] | None = None, machine: str | None = None) -> Check:
    """Which TensorFlow build is installed (``builds``, default: this venv's) against the one this machine takes
    (:func:`course_lib.environment.tensorflow_build.tensorflow_variant`); ``machine``: for the tests."""
    builds = tensorflow_build.installed_builds() if builds is None else builds
    rebuild = "COURSE_FORCE_SETUP=1 make setup (it installs the build this machine takes and rebuilds Horovod)"
    try:
        variant, why = tensorflow_build.tensorflow_variant()
    except ValueError as error:
        return Check("TensorFlow build", "fail", str(error), "unset COURSE_GPU, or set it to 1 or 0")
    found = ", ".join(f"{name} {version} ({tensorflow_build.BUILDS[name]})" for name, version in builds.items())
    if not builds:
        return Check("TensorFlow build", "fail", "no TensorFlow installed", SETUP_HINT)
    if len(builds) > 1:
        return Check("TensorFlow build", "fail", f"{found}: two wheels in one tensorflow/ folder",
                     f"{sys.executable} -m pip uninstall -y {' '.join(builds)}, then {rebuild}")
    name = next(iter(builds))
    takes = f"this machine takes the {variant} build ({why})"
    expected = tensorflow_build.expected_build(variant, machine)
    if expected is None or name == expected:
        return Check("TensorFlow build", "ok", f"{found}; {takes}")
    if variant == "gpu":  # TensorFlow would not see the GPUs the course's plans count on
        return Check("TensorFlow build", "fail", f"{found}, but {takes}: TensorFlow cannot use the GPUs",
                     rebuild)
    return Check("TensorFlow build", "warn", f"{found}, but {takes}: every TensorFlow start logs CUDA "
                 "registration and cuInit errors (harmless on a CPU, but they read as errors)", rebuild)


def _check_devices(gpus: list[str]) -> list[Check]:
    cores = cpu_cores()
    checks = [Check("CPU cores", "ok", str(cores))]
    if gpus:
        checks.append(Check("GPUs", "ok", f"{len(gpus)}: " + "; ".join(gpus)))
    else:
        checks.append(Check("GPUs", "ok", "none — this is a CPU-only machine; the course simulates "
                            "devices by splitting the CPU and runs Horovod workers as CPU processes"))
    return checks


def _check_data() -> Check:
    explicit = os.environ.get("COURSE_DATA_DIR")
    try:
        if explicit:
            directory = Path(explicit).expanduser()
            missing = [s for s in fmnist_files.IDX_SHA256 if not (directory / f"{s}.gz").is_file()]
            if missing:
                return Check("Fashion-MNIST", "fail",
                             f"COURSE_DATA_DIR={directory} lacks {', '.join(m + '.gz' for m in missing)}",
                             "put the four Fashion-MNIST .gz files there, or unset COURSE_DATA_DIR to use "
                             "/usr/share/datasets/fashion-mnist (sudo apt-get install dataset-fashion-mnist)")
        else:
            directory = fmnist_files.find_raw_files()
        fmnist_files.verify_raw_files(directory)
    except fmnist_files.DataCorruptError as error:
        return Check("Fashion-MNIST", "fail", str(error).splitlines()[0],
                     "delete the corrupt file(s) named above and reinstall: sudo apt-get install "
                     "--reinstall dataset-fashion-mnist (or copy the four original .gz files into "
                     "COURSE_DATA_DIR)")
    except fmnist_files.DataError as error:
        return Check("Fashion-MNIST", "fail", str(error).splitlines()[0],
                     "sudo apt-get install dataset-fashion-mnist (or set COURSE_DATA_DIR to a folder "
                     "holding the four original .gz files)")
    return Check("Fashion-MNIST", "ok", f"{directory} (4 files, sha256 of the images and labels match the "
                 "published dataset)")


def run_checks() -> DoctorReport:
    """Run every check and return the report (nothing is printed).

    Returns:
        The report; ``report.ok`` is False when something the course needs is missing.
    """
    gpus = gpu_names()
    report = DoctorReport()
    report.checks.append(_check_python())
    report.checks.append(_check_version("TensorFlow", tuple(tensorflow_build.BUILDS), "tensorflow"))
    report.checks.append(_check_tensorflow_build())
    report.checks.append(_check_version("tf-keras", ("tf_keras", "tf-keras"), "tf_keras"))
    probe = _probe_output(_TF_PROBE)   # Horovod's build and Keras 2: one interpreter answers both
    horovod_checks = _check_horovod(gpus, probe)
    report.checks.extend(horovod_checks)
    report.checks.extend(_check_keras2(all(check.status != "fail" for check in horovod_checks), probe))
    report.checks.extend(_check_devices(gpus))
    report.checks.append(_check_data())
    report.checks.append(_check_version("tensorflow-datasets", ("tensorflow-datasets",), "tensorflow-datasets"))
    report.checks.append(_check_version("JupyterLab", ("jupyterlab",), "jupyterlab"))
    report.checks.append(_check_version("ipywidgets", ("ipywidgets",), "ipywidgets"))
    report.checks.append(check_frameworks())
    return report


def check_frameworks(versions: dict[str, object] | None = None) -> Check:
    """Notebook 07's second venv (.venv-07): torch with Gloo, jax and keras 3 on JAX, asked in its own python.

    Args:
        versions: :func:`course_lib.environment.frameworks.frameworks_versions`'s answer (default: asked now).

    Introduced in notebooks/07_frameworks.ipynb.
    """
    found = frameworks_versions() if versions is None else versions
    name = "PyTorch / JAX / Keras 3 (notebook 07)"
    if "error" in found:
        return Check(name, "fail", str(found["error"]), "make setup")
    build = f"CUDA {found['cuda']}" if found.get("cuda") else "CPU build"
    detail = (f"torch {found['torch']} ({build}, Gloo {'yes' if found.get('gloo') else 'NO'}), jax {found['jax']}, "
              f"keras {found['keras']} on {found['keras_backend']}, in {frameworks_venv().name}")
    if not found.get("gloo"):
        return Check(name, "fail", detail, "COURSE_FORCE_SETUP=1 make setup (this torch has no Gloo)")
    return Check(name, "ok", detail)
