"""CMake 4 and Horovod's bundled Gloo (issue 53, item 3): what tools/setup.sh does about it, tried for real.

CMake 4 (Ubuntu 26.04 ships 4.2.3) removed compatibility with ``cmake_minimum_required(VERSION < 3.5)``, which
Horovod 0.28.1's ``third_party/gloo/CMakeLists.txt`` still declares (2.8.12): configuring it fails unless
``CMAKE_POLICY_VERSION_MINIMUM`` names a version CMake 4 still knows. Set-up exports it where ``cmake --version``
says 4 or later. Here: the Gloo folder of the real source package is configured (configure step only) with PyPI's
CMake 4 wheel, with and without the variable; and set-up's own lines are run against a fake ``cmake`` of each
major version to show they set it where, and only where, it is needed.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "tools" / "setup.sh"
#: Ubuntu 26.04's CMake (../shared/FACTS.md, "Checked 2026-12-02"): the version a learner there has.
CMAKE4 = "4.2.3"


def _setup_constant(name: str) -> str:
    match = re.search(rf"^{name}=(\S+)$", SETUP.read_text(), re.MULTILINE)
    assert match, f"tools/setup.sh sets no {name}"
    return match.group(1)


@pytest.fixture(scope="module")
def gloo_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Horovod's source package, the one set-up builds (its sha256 checked as set-up does), unpacked."""
    folder = tmp_path_factory.mktemp("horovod-sdist")
    version = re.search(r"^horovod==(\S+)$", (ROOT / "requirements" / "constraints.txt").read_text(),
                        re.MULTILINE)
    assert version, "requirements/constraints.txt pins no horovod"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    "--no-cache-dir", "-d", str(folder), f"horovod=={version.group(1)}"], check=True, timeout=300)
    sdist = folder / f"horovod-{version.group(1)}.tar.gz"
    assert hashlib.sha256(sdist.read_bytes()).hexdigest() == _setup_constant("HVD_SDIST_SHA256")
    with tarfile.open(sdist) as archive:
        archive.extractall(folder, filter="data")
    gloo = folder / f"horovod-{version.group(1)}" / "third_party" / "gloo"
    assert (gloo / "CMakeLists.txt").is_file()
    return gloo


@pytest.fixture(scope="module")
def cmake4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PyPI's CMake wheel of Ubuntu 26.04's version, installed into a folder of its own (not the venv)."""
    target = tmp_path_factory.mktemp("cmake4")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary", ":all:",
                    "--target", str(target), f"cmake=={CMAKE4}"], check=True, timeout=300)
    binary = target / "cmake" / "data" / "bin" / "cmake"
    assert binary.is_file(), sorted(p.name for p in target.iterdir())
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith(f"cmake version {CMAKE4}"), version
    return binary


def _configure(cmake: Path, source: Path, build: Path, policy: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CMAKE_POLICY_VERSION_MINIMUM"}
    if policy is not None:
        env["CMAKE_POLICY_VERSION_MINIMUM"] = policy
    return subprocess.run([str(cmake), "-S", str(source), "-B", str(build)], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.slow
def test_gloo_configures_with_cmake4_only_with_the_policy_variable(gloo_source: Path, cmake4: Path,
                                                                     tmp_path: Path) -> None:
    refused = _configure(cmake4, gloo_source, tmp_path / "without", None)
    assert refused.returncode != 0, "CMake 4 configured Gloo without the variable: the work-around is not needed"
    assert "Compatibility with CMake < 3.5 has been removed" in refused.stderr, refused.stderr[-2000:]
    done = _configure(cmake4, gloo_source, tmp_path / "with", "3.5")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "with" / "Makefile").is_file()


def _setup_cmake_lines() -> str:
    """The lines of tools/setup.sh that decide the variable (from ``cmake_major=`` to the ``fi`` after it)."""
    lines = SETUP.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("cmake_major="))
    end = next(i for i in range(start, len(lines)) if lines[i].strip().endswith("fi"))
    return "\n".join(line.strip() for line in lines[start:end + 1])


@pytest.mark.parametrize("version, expected", [("4.2.3", "3.5"), ("4.0.0", "3.5"), ("3.25.1", ""),
                                               ("3.31.10", "")])
def test_setup_sets_the_policy_for_cmake4_only(tmp_path: Path, version: str, expected: str) -> None:
    fake = tmp_path / "cmake"
    fake.write_text(f"#!/bin/sh\necho 'cmake version {version}'\necho\necho 'CMake suite maintained'\n")
    fake.chmod(0o755)
    script = _setup_cmake_lines() + '\nprintf "%s" "${CMAKE_POLICY_VERSION_MINIMUM:-}"\n'
    env = {k: v for k, v in os.environ.items() if k != "CMAKE_POLICY_VERSION_MINIMUM"}
    env["PATH"] = f"{tmp_path}:{env['PATH']}"
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout == expected, (version, out.stdout, out.stderr)
