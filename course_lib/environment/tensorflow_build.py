"""Which TensorFlow build a machine takes (CPU-only or CUDA-capable), which one is installed, and whether the
packages around it are consistent.

TensorFlow 2.21 comes as two wheels that install the same ``tensorflow`` package: ``tensorflow-cpu`` (no CUDA
plugins) and ``tensorflow`` (CUDA-capable; with its ``and-cuda`` extra it brings the CUDA libraries). The
CUDA-capable wheel started on a machine without a GPU logs "failed call to cuInit" at level E in every process,
which a learner reads as an error. So:

- :func:`tensorflow_variant` is the one place that decides a machine's variant (``cpu`` / ``gpu``):
  ``tools/setup.sh`` installs ``pyproject.toml``'s extra of that name, ``make doctor`` compares the installed
  build with it, and the notebooks' harness lets the CUDA build's start-up lines through on ``gpu`` machines only.
- ``tf-keras`` 2.21 requires ``tensorflow``; set-up installs it without its dependencies next to
  ``tensorflow-cpu``, and :func:`unmet_requirements` (``pip check`` with that one requirement met under the other
  name, :data:`PROVIDES`) checks that nothing else is missing (``docs/decisions/tensorflow-2.21.md``).

Nothing here imports TensorFlow. Introduced in notebooks/00_setup.ipynb (the doctor's "TensorFlow build" line).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from typing import Mapping

from course_lib.training.files import course_root
from course_lib.training.machine.hardware import gpu_names

__all__ = ["BUILDS", "PROVIDES", "tensorflow_variant", "installed_builds", "expected_build", "unwanted_builds",
           "unmet_requirements"]

#: The distributions that install TensorFlow's ``tensorflow`` package, and what each is. Both write the same
#: folder: a venv holds one (set-up removes the other before it installs one).
BUILDS = {"tensorflow-cpu": "the CPU-only build", "tensorflow": "the CUDA-capable build"}
#: A distribution that provides another's package under its own name: tensorflow-cpu is ``tensorflow`` for
#: tf-keras, whose one requirement (``tensorflow>=2.21,<2.22``) names the CUDA-capable wheel.
PROVIDES = {"tensorflow-cpu": "tensorflow"}
_PIP_MISSING = re.compile(r"(\S+) (\S+) requires (\S+), which is not installed\.")


def tensorflow_variant(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Which TensorFlow build this machine takes, and why.

    Args:
        env: The environment to read ``COURSE_GPU`` from (default ``os.environ``): ``1`` forces ``gpu``, ``0``
            forces ``cpu``; unset or empty, the machine decides: ``gpu`` when ``nvidia-smi -L`` lists a GPU.

    Returns:
        ``("gpu" | "cpu", reason)``, e.g. ``("cpu", "nvidia-smi not found")``.

    Raises:
        ValueError: ``COURSE_GPU`` is set to something other than 0 or 1.
    """
    forced = (os.environ if env is None else env).get("COURSE_GPU", "")
    if forced not in ("", "0", "1"):
        raise ValueError(f"COURSE_GPU={forced!r}: use 1 (the GPU build), 0 (the CPU build), or leave it unset "
                         "(then nvidia-smi decides)")
    if forced:
        return ("gpu" if forced == "1" else "cpu"), f"COURSE_GPU={forced}"
    if shutil.which("nvidia-smi") is None:
        return "cpu", "nvidia-smi not found"
    gpus = gpu_names()
    if not gpus:
        return "cpu", "nvidia-smi lists no GPU"
    return "gpu", f"nvidia-smi lists {len(gpus)} GPU(s): {', '.join(gpus)}"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def installed_builds() -> dict[str, str]:
    """The TensorFlow distributions installed in this interpreter, ``{name: version}`` (nothing is imported)."""
    return {name: version for name in BUILDS if (version := _version(name)) is not None}


def expected_build(variant: str, machine: str | None = None) -> str | None:
    """The TensorFlow distribution set-up installs for ``variant`` on this kind of machine, read from
    ``pyproject.toml``'s extra of that name (the one list of what each variant installs).

    Args:
        variant: ``"cpu"`` or ``"gpu"`` (:func:`tensorflow_variant`).
        machine: ``platform.machine()`` to evaluate the extra's markers for (default: this machine's): PyPI has
            tensorflow-cpu 2.21 for x86-64 only, so the ``cpu`` extra names ``tensorflow`` elsewhere.

    Returns:
        ``"tensorflow-cpu"`` or ``"tensorflow"``; None when pyproject.toml is missing or names neither.
    """
    from packaging.requirements import Requirement  # late: a fresh venv has no packaging when set-up asks the variant

    try:
        extras = tomllib.loads((course_root() / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None
    environment = {"platform_machine": machine or platform.machine()}
    for line in extras.get(variant, []):
        requirement = Requirement(line)
        if requirement.name in BUILDS and (requirement.marker is None or requirement.marker.evaluate(environment)):
            return requirement.name
    return None


def _explained(line: str) -> bool:
    """Whether a ``pip check`` line is a requirement met under another name (:data:`PROVIDES`): e.g.
    "tf-keras 2.21.0 requires tensorflow, which is not installed." next to a tensorflow-cpu its range admits."""
    from packaging.requirements import Requirement  # late: a fresh venv has no packaging when set-up asks the variant

    match = _PIP_MISSING.fullmatch(line.strip())
    if not match:
        return False
    dist, needed = match.group(1), match.group(3).lower()
    try:
        wanted = [Requirement(r) for r in metadata.requires(dist) or []]
    except metadata.PackageNotFoundError:
        return False
    for provider, provided in PROVIDES.items():
        version = _version(provider)
        if provided != needed or version is None:
            continue
        if any(r.name.lower() == needed and (r.marker is None or r.marker.evaluate({"extra": ""}))
               and r.specifier.contains(version, prereleases=True) for r in wanted):
            return True
    return False


def unmet_requirements(python: str | None = None, timeout: float = 120.0) -> list[str]:
    """``pip check``'s complaints about an environment, less those :data:`PROVIDES` explains.

    Args:
        python: The interpreter whose packages are checked (default: this one). The explanations are read
            from this interpreter's packages: run it with the checked one (set-up does).
        timeout: Seconds to wait for ``pip check``.

    Returns:
        The lines left (empty: consistent); one line saying so when ``pip check`` could not run.
    """
    try:
        proc = subprocess.run([python or sys.executable, "-m", "pip", "check"], capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        return [f"pip check did not run: {error}"]
    if proc.returncode == 0:
        return []
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        return [f"pip check failed (status {proc.returncode}): {proc.stderr.strip()[-300:]}"]
    return [line for line in lines if not _explained(line)]


def unwanted_builds(variant: str, machine: str | None = None) -> list[str]:
    """The TensorFlow distributions installed here that ``variant`` does not take (set-up removes them first).

    Args:
        variant: ``"cpu"`` or ``"gpu"``.
        machine: As in :func:`expected_build`.

    Returns:
        e.g. ``["tensorflow"]`` in a venv made with the CUDA-capable wheel on a CPU machine; every installed
        one when both are (a mix: the build this variant takes is installed again after).

    Raises:
        ValueError: pyproject.toml names no TensorFlow build for ``variant``.
    """
    installed = installed_builds()
    if not installed:
        return []
    wanted = expected_build(variant, machine)
    if wanted is None:
        raise ValueError(f"pyproject.toml's extra {variant!r} names none of {', '.join(BUILDS)}")
    if len(installed) > 1:
        return sorted(installed)
    return [name for name in installed if name != wanted]


def main(argv: list[str]) -> int:
    """``variant`` prints ``cpu|gpu<TAB>reason``; ``unwanted VARIANT`` prints :func:`unwanted_builds`;
    ``installed`` prints the installed TensorFlow's version (nothing when there is none; set-up's upgrade line);
    ``check`` prints :func:`unmet_requirements` (status 1 when there are any)."""
    if argv == ["installed"]:
        print(*sorted(set(installed_builds().values())))
        return 0
    if len(argv) == 2 and argv[0] == "unwanted":
        try:
            print(*unwanted_builds(argv[1]))
        except ValueError as error:
            print(error, file=sys.stderr)
            return 2
        return 0
    if argv == ["variant"]:
        try:
            print(*tensorflow_variant(), sep="\t")
        except ValueError as error:
            print(error, file=sys.stderr)
            return 2
        return 0
    if argv == ["check"]:
        problems = unmet_requirements()
        print(*problems, sep="\n")
        return 1 if problems else 0
    print("usage: python -m course_lib.environment.tensorflow_build variant | unwanted VARIANT | installed | check",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
