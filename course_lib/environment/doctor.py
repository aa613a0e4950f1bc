"""Environment check: ``python -m course_lib doctor``.

Checks everything the course needs and prints a short report, one line per item; each missing
piece gets one line with the exact remedy. The exit status is non-zero when something the course
needs is missing (warnings, such as "no GPU", do not fail).

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

from course_lib.environment import tensorflow_build
from course_lib.environment.doctor_report import SETUP_HINT, Check, DoctorReport, check_version
from course_lib.environment.frameworks import frameworks_venv, frameworks_versions
from course_lib.environment.horovod_checks import check_horovod_and_keras
from course_lib.training import fmnist_files
from course_lib.training.machine.hardware import cpu_cores, gpu_names
from course_lib.training.files import course_root

# Handed on, not defined here: tools/setup.sh's HVD_PROBE imports horovod_build_info from this module (an edit of
# setup.sh changes its stamp and so re-runs every machine's set-up), and benchmarks/run.py package_version.
from course_lib.environment.doctor_report import package_version as package_version
from course_lib.environment.horovod_checks import horovod_build_info as horovod_build_info

__all__ = ["run_checks", "check_frameworks"]


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
    report.checks.append(check_version("TensorFlow", tuple(tensorflow_build.BUILDS), "tensorflow"))
    report.checks.append(_check_tensorflow_build())
    report.checks.append(check_version("tf-keras", ("tf_keras", "tf-keras"), "tf_keras"))
    report.checks.extend(check_horovod_and_keras(gpus))
    report.checks.extend(_check_devices(gpus))
    report.checks.append(_check_data())
    report.checks.append(check_version("tensorflow-datasets", ("tensorflow-datasets",), "tensorflow-datasets"))
    report.checks.append(check_version("JupyterLab", ("jupyterlab",), "jupyterlab"))
    report.checks.append(check_version("ipywidgets", ("ipywidgets",), "ipywidgets"))
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
