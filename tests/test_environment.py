"""The course environment: one place for pins, the doctor, set-up idempotence, the lab server."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from course_lib.environment import doctor, doctor_report, horovod_checks, tensorflow_build
from course_lib.environment.lab import lab_command

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)")

# The pins the course was measured with (issue 2; TensorFlow 2.18 with tf-keras since issue 34, 2.21 since issue
# 53). Changing one is a deliberate act: update the constraints file, then this list.
MEASURED = {
    "tensorflow": "2.21.0", "tensorflow-cpu": "2.21.0", "tf-keras": "2.21.0", "horovod": "0.28.1", "numpy": "2.5.5",
    "protobuf": "7.36.2", "h5py": "3.14.0",
    "tensorflow-datasets": "4.9.10", "tensorflow-metadata": "1.21.0", "importlib-resources": "7.1.0",
    "pyarrow": "25.0.1", "jupyterlab": "4.6.6", "ipywidgets": "8.1.9", "nbval": "0.11.0",
    "pytest": "9.2.0", "nbformat": "5.11.1", "nbclient": "0.11.0", "matplotlib": "3.11.2",
    "pandas": "3.0.6", "tqdm": "4.70.1", "ipykernel": "7.4.0",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(lines: list[str]) -> dict[str, str]:
    pins = {}
    for line in lines:
        match = PIN.match(line.strip())
        if match:
            pins[_norm(match.group(1))] = match.group(2)
    return pins


@pytest.fixture(scope="module")
def constraints() -> dict[str, str]:
    return _pins(CONSTRAINTS.read_text().splitlines())


def test_constraints_hold_the_measured_stack(constraints: dict[str, str]) -> None:
    for name, version in MEASURED.items():
        assert constraints.get(name) == version, f"{name} must be pinned to {version} in {CONSTRAINTS}"


def test_pyproject_ranges_admit_the_locked_versions(constraints: dict[str, str]) -> None:
    """pyproject.toml states ranges (what the library needs); the lock alone pins."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines.extend(extra)
    assert lines, "pyproject.toml lists no requirements"
    for line in lines:
        requirement = Requirement(line)
        assert not any(spec.operator == "==" for spec in requirement.specifier), (
            f"pyproject.toml pins {line}: exact versions belong in {CONSTRAINTS.name} only")
        name = _norm(requirement.name)
        locked = constraints.get(name)
        assert locked is not None, f"{requirement.name} is required but not locked in {CONSTRAINTS.name}"
        assert requirement.specifier.contains(locked, prereleases=True), (
            f"pyproject.toml requires {line} but the lock has {name}=={locked}")


def test_environment_yml_agrees_with_constraints(constraints: dict[str, str]) -> None:
    text = (ROOT / "environment.yml").read_text()
    pip_lines = [line.strip()[2:] for line in text.splitlines() if line.startswith("      - ")]
    pins = _pins(pip_lines)
    assert "tensorflow" in pins and "numpy" in pins
    for name, version in pins.items():
        assert constraints.get(name) == version, f"environment.yml pins {name}=={version}, constraints differ"
    assert "tf-keras" in pins or "tf_keras" in pins, "environment.yml must install tf-keras (Keras 2)"
    # conda's interpreter: the newest minor pyproject.toml's requires-python admits (the one place the range lives)
    supported = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    newest = max(minor for minor in range(10, 30) if f"3.{minor}" in supported)
    assert f"  - python=3.{newest}\n" in text
    assert "horovod==" + constraints["horovod"] in text


def test_setup_and_makefile_hold_no_pins_of_their_own() -> None:
    for path in (ROOT / "Makefile", ROOT / "tools" / "setup.sh"):
        literal = re.findall(r"[A-Za-z][\w.\-]*==\d[\w.]*", path.read_text())
        assert not literal, f"{path.name} pins {literal}: read versions from requirements/constraints.txt"


def test_installed_versions_are_the_locked_ones(constraints: dict[str, str]) -> None:
    builds = tensorflow_build.installed_builds()
    assert len(builds) == 1, f"one TensorFlow build must be installed, found {builds or 'none'}"
    wrong = []
    for name, version in constraints.items():
        if not _applies_here(name):
            continue  # a pin marked for another Python version
        if name in tensorflow_build.BUILDS and name not in builds:
            continue  # the other variant's TensorFlow build (the lock pins both at one version)
        found = _installed(name)
        if found != version:
            wrong.append(f"{name}: locked {version}, installed {found}")
    assert not wrong, "the venv differs from the lock (run `make setup`):\n" + "\n".join(wrong)


def _applies_here(name: str) -> bool:
    """Whether the lock's line for ``name`` applies to this interpreter (its environment marker)."""
    from packaging.requirements import Requirement

    for line in CONSTRAINTS.read_text().splitlines():
        match = PIN.match(line.strip())
        if match and _norm(match.group(1)) == name:
            marker = Requirement(line.strip()).marker
            return marker is None or marker.evaluate()
    return True


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _doctor(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-m", "course_lib", "doctor"], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def doctor_here() -> subprocess.CompletedProcess[str]:
    """The real ``python -m course_lib doctor`` on this machine, run once for the module (it imports
    TensorFlow once, in the probe that answers for Horovod's build and Keras 2): test_doctor_passes_here and
    test_build_probe_agrees_with_horovodrun_check_build read its output."""
    return _doctor({})


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_doctor_passes_here(doctor_here: subprocess.CompletedProcess[str]) -> None:
    proc = doctor_here
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Verdict: ready for the course." in proc.stdout
    for name in ("Python", "TensorFlow", "TensorFlow build", "Horovod build", "CPU cores", "GPUs", "Fashion-MNIST",
                 "JupyterLab", "ipywidgets"):
        assert f"] {name}:" in proc.stdout


def _doctor_in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                       env_extra: dict[str, str]) -> tuple[int, str]:
    """``python -m course_lib doctor``'s main() in this process, its TensorFlow-importing probe (Horovod's
    build and Keras 2, one interpreter) answered as on a ready machine: for the tests of one failing check.
    That the real probe passes here is test_doctor_passes_here's (a subprocess, the whole command)."""
    from course_lib.__main__ import main

    for name, value in env_extra.items():
        monkeypatch.setenv(name, value)
    ready = ('KERAS {"keras2": true, "detail": "stub", "horovod_backend": "tf_keras.src.backend", '
             '"horovod_keras2": true}\n'
             'HOROVOD_BUILD {"TensorFlow": true, "MPI": true, "Gloo": true, "NCCL": false}\n')
    monkeypatch.setattr(horovod_checks, "_probe_output", lambda *args, **kwargs: ready)
    capsys.readouterr()
    status = main(["doctor"])
    return status, capsys.readouterr().out


def test_doctor_fails_with_remedy_when_data_dir_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    status, out = _doctor_in_process(capsys, monkeypatch, {"COURSE_DATA_DIR": str(tmp_path / "nowhere")})
    assert status == 1
    assert "[FAIL] Fashion-MNIST: COURSE_DATA_DIR=" in out
    assert "→ put the four Fashion-MNIST .gz files there" in out
    assert "Verdict: NOT ready — fix: Fashion-MNIST." in out


def _check_build_marks(text: str) -> dict[str, bool]:
    """``horovodrun --check-build``'s ``[X] Name`` marks (a name is True if any section marks it)."""
    info: dict[str, bool] = {}
    for match in re.finditer(r"\[(X| )\]\s+(\w+)", text):
        info[match.group(2)] = info.get(match.group(2), False) or match.group(1) == "X"
    return info


#: ``horovodrun --check-build`` (the console script's own entry point, horovod.runner.launch.run_commandline), in an
#: interpreter that imported Horovod's TensorFlow extension first. Horovod's check forks one process per item and
#: imports the extension in each (six TensorFlow imports, ~28 CPU-s); forked from here, each finds it imported (one
#: import, ~8 CPU-s, issue 31). Every mark is still Horovod's own code asking the extension; an extension that
#: does not load fails here too and again in each fork, which then marks it missing, as horovodrun does.
CHECK_BUILD = """
import sys
try:
    import horovod.tensorflow  # noqa: F401
except Exception:
    pass
from horovod.runner.launch import run_commandline
sys.argv = ["horovodrun", "--check-build"]
sys.exit(run_commandline())
"""


@pytest.mark.requires("horovodrun")
@pytest.mark.slow  # > 2 s: left out of `make check`
def test_build_probe_agrees_with_horovodrun_check_build(doctor_here: subprocess.CompletedProcess[str]) -> None:
    """The doctor's one-import probe says what Horovod's own check (``horovodrun --check-build``) says.

    The probe's answer is read where the learner reads it: the real doctor run's "Horovod build" line
    ("built with" the names the probe marked True; doctor_here), not from a second run of the probe.
    Horovod's answer is its console script's entry point run in a process that imported the extension once
    (:data:`CHECK_BUILD`).
    """
    proc = subprocess.run([sys.executable, "-c", CHECK_BUILD], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    marks = _check_build_marks(proc.stdout)
    line = re.search(r"^\[(?:  ok|warn)\] Horovod build: built with ([\w, ]+?)(?: \(.*\))?$",
                     doctor_here.stdout, re.M)  # a warning (no MPI, no NCCL) adds "(...)"
    assert line, doctor_here.stdout
    built = set(line.group(1).split(", "))
    assert "TensorFlow" in built, line.group(0)
    for name in ("TensorFlow", "Gloo", "MPI", "NCCL"):
        assert (name in built) == marks[name], (name, line.group(0), proc.stdout)


def test_build_probe_reports_an_extension_that_does_not_load(tmp_path: Path) -> None:
    """An interpreter whose horovod.tensorflow fails to import: TensorFlow False, with the reason."""
    site = tmp_path / "site" / "horovod" / "tensorflow"
    site.mkdir(parents=True)
    (site.parent / "__init__.py").write_text("")
    (site / "__init__.py").write_text("raise ImportError('Extension horovod.tensorflow has not been built')\n")
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'site'} exec {sys.executable} \"$@\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    info = horovod_checks.horovod_build_info(str(fake))
    assert info == {"TensorFlow": False, "error": "Extension horovod.tensorflow has not been built"}
    assert horovod_checks.horovod_build_info(str(tmp_path / "no-such-python")) == {}


def test_second_setup_is_fast_and_changes_nothing() -> None:
    # set-up runs on the venv of this session: one that is not this checkout's .venv (a worktree's tests run with
    # another checkout's venv) would be set up again from this checkout's files (its editable course_lib moved).
    own = Path(os.environ.get("COURSE_VENV") or ROOT / ".venv")   # make's VENV= (tools/learner.mk exports it)
    assert Path(sys.prefix).resolve() == own.resolve(), (
        f"this test runs tools/setup.sh on the venv it runs in, {sys.prefix}, which is not this checkout's "
        f"{own}: run it with this checkout's own venv (make setup here), or deselect it")
    start = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "tools" / "setup.sh")], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COURSE_VENV": str(Path(sys.prefix))})
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "already set up" in proc.stdout
    assert elapsed < 30, f"a second set-up took {elapsed:.0f} s"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_lab_starts_headless_and_answers(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    env.pop("JUPYTER_PATH", None)
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(lab_command(port=port, token="course-test"), env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        status = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                                 headers={"Authorization": "token course-test"})
                with urllib.request.urlopen(request, timeout=2) as response:
                    status = response.status
                    break
            except OSError:
                time.sleep(0.5)
        assert status == 200, f"JupyterLab did not answer on port {port}:\n" + (tmp_path / "lab.log").read_text()
        kernels = urllib.request.Request(f"http://127.0.0.1:{port}/api/kernelspecs",
                                         headers={"Authorization": "token course-test"})
        with urllib.request.urlopen(kernels, timeout=5) as response:
            body = response.read().decode()
        assert '"default": "python3"' in body.replace("'", '"')
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()
    assert proc.returncode is not None


def test_ci_runs_the_readme_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme


# ---------------------------------------------------------------- the doctor's failures (issue 20)
def test_doctor_fails_on_a_version_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = doctor_report.pin("tensorflow")
    assert pinned, "requirements/constraints.txt pins no tensorflow"
    monkeypatch.setattr(doctor_report, "package_version", lambda *dists: "2.16.1")
    check = doctor_report.check_version("TensorFlow", ("tensorflow",), "tensorflow")
    assert check.status == "fail"
    assert check.detail == f"2.16.1 installed, the course is tested with {pinned}"
    assert f"tensorflow=={pinned}" in check.remedy and "make setup" in check.remedy
    monkeypatch.setattr(doctor_report, "package_version", lambda *dists: pinned)
    assert doctor_report.check_version("TensorFlow", ("tensorflow",), "tensorflow").status == "ok"


def _fake_build(folder: Path, *, tensorflow: bool, gloo: bool) -> str:
    """An interpreter that answers the doctor's build probe like a build with or without them."""
    answer = ({"TensorFlow": True, "MPI": True, "Gloo": gloo, "NCCL": False} if tensorflow
              else {"TensorFlow": False, "error": "undefined symbol: _ZN10tensorflow8OpKernel"})
    fake = folder / "python"
    fake.write_text(f"#!/bin/sh\necho 'HOROVOD_BUILD {json.dumps(answer)}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return str(fake)


@pytest.mark.parametrize("tensorflow, gloo, detail, remedy", [
    (False, True, "TensorFlow missing", "rebuild after TensorFlow: COURSE_FORCE_SETUP=1 make setup"),
    (True, False, "Gloo missing", "HOROVOD_WITH_GLOO=1: COURSE_FORCE_SETUP=1 make setup"),
    (True, True, None, None),  # the control: the same fake, fully built, passes
])
def test_doctor_fails_on_a_horovod_build_without_tensorflow_or_gloo(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tensorflow: bool, gloo: bool,
        detail: str | None, remedy: str | None) -> None:
    fake = _fake_build(tmp_path, tensorflow=tensorflow, gloo=gloo)
    monkeypatch.setattr(horovod_checks, "_probe_python", lambda: fake)
    monkeypatch.setattr(horovod_checks, "_horovodrun_path", lambda: "/usr/bin/true")
    monkeypatch.setattr(doctor_report, "package_version", lambda *dists: doctor_report.pin("horovod"))
    checks = {c.name: c for c in horovod_checks._check_horovod(gpus=[])}
    assert checks["Horovod"].status == "ok"
    build = checks["Horovod build"]
    if detail is None:
        assert build.status == "ok" and build.detail == "built with TensorFlow, Gloo, MPI", build
    else:
        assert build.status == "fail" and detail in build.detail and remedy in build.remedy, build


def test_doctor_fails_when_horovodrun_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(horovod_checks, "_horovodrun_path", lambda: None)
    monkeypatch.setattr(doctor_report, "package_version", lambda *dists: doctor_report.pin("horovod"))
    build = {c.name: c for c in horovod_checks._check_horovod(gpus=[])}["Horovod build"]
    assert build.status == "fail" and "horovodrun" in build.detail and "make setup" in build.remedy


@pytest.mark.slow  # copies, rewrites and verifies the raw files: 2.7 s with the machine loaded
def test_doctor_fails_on_corrupt_data_with_remedy(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip
    from course_lib.training import fmnist_files

    source = fmnist_files.find_raw_files()
    for stem in fmnist_files.IDX_SHA256:
        (tmp_path / f"{stem}.gz").write_bytes((source / f"{stem}.gz").read_bytes())
    images = tmp_path / "t10k-images-idx3-ubyte.gz"
    raw = bytearray(gzip.decompress(images.read_bytes()))
    raw[16 + 784 * 3 + 200] ^= 0x01  # one pixel
    images.write_bytes(gzip.compress(bytes(raw), compresslevel=1))  # level 9 (the default) costs ~3 CPU-s
    status, out = _doctor_in_process(capsys, monkeypatch, {"COURSE_DATA_DIR": str(tmp_path)})
    assert status == 1, out
    assert f"[FAIL] Fashion-MNIST: Corrupt Fashion-MNIST file(s): {images}" in out
    assert "→ delete the corrupt file(s) named above and reinstall: sudo apt-get install --reinstall" \
        in out
    assert "Verdict: NOT ready — fix: Fashion-MNIST." in out


# ---------------------------------------------------------------- TensorFlow's build (issue 44: no red noise)
def _load_harness():
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebooks_harness_for_environment",
                                                  ROOT / "tests" / "notebooks" / "harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # imports TensorFlow: ~4 s
def test_tensorflow_starts_without_error_lines_on_a_cpu_machine() -> None:
    """The venv set-up built starts TensorFlow, and lists its devices, without one level-E/F line on stderr.

    On a CPU machine set-up installs tensorflow-cpu; the CUDA-capable ``tensorflow`` wheel logs "Unable to register
    cuDNN/cuFFT/cuBLAS factory" and "failed call to cuInit" at level E here. The lines are judged by the notebooks'
    own ERROR_PATTERNS (tests/notebooks/harness.py), with nothing allowed: not even stderr_allow.txt's entries.
    """
    variant, why = tensorflow_build.tensorflow_variant()
    if variant != "cpu":
        pytest.skip(f"this machine takes the {variant} build ({why})")
    harness = _load_harness()
    proc = subprocess.run([sys.executable, "-c", "import tensorflow as tf; print(tf.config.list_physical_devices())"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CPU" in proc.stdout
    errors = harness.stderr_errors(proc.stderr, [])
    assert errors == [], (f"TensorFlow ({', '.join(tensorflow_build.installed_builds())}) logged errors at start-up "
                          "(`make doctor` says which build this venv holds and how to switch):\n" + "\n".join(errors))


@pytest.mark.parametrize("gpu, builds, machine, status, words", [
    ("0", {"tensorflow-cpu": "2.18.1"}, "x86_64", "ok", "the cpu build (COURSE_GPU=0)"),
    ("0", {"tensorflow": "2.18.1"}, "x86_64", "warn", "cuInit errors"),      # today's shared venv
    ("0", {"tensorflow": "2.18.1"}, "aarch64", "ok", "the cpu build"),        # no tensorflow-cpu wheel there
    ("1", {"tensorflow": "2.18.1"}, "x86_64", "ok", "the gpu build (COURSE_GPU=1)"),
    ("1", {"tensorflow-cpu": "2.18.1"}, "x86_64", "fail", "cannot use the GPUs"),
    ("0", {"tensorflow": "2.18.1", "tensorflow-cpu": "2.18.1"}, "x86_64", "fail", "two wheels in one"),
    ("0", {}, "x86_64", "fail", "no TensorFlow installed"),
    ("yes", {"tensorflow-cpu": "2.18.1"}, "x86_64", "fail", "COURSE_GPU='yes'"),
])
def test_doctor_names_the_tensorflow_build_and_flags_the_wrong_one(
        monkeypatch: pytest.MonkeyPatch, gpu: str, builds: dict[str, str], machine: str, status: str,
        words: str) -> None:
    monkeypatch.setenv("COURSE_GPU", gpu)
    check = doctor._check_tensorflow_build(builds, machine)
    assert check.name == "TensorFlow build" and check.status == status, check
    assert words in check.detail, check
    assert (check.remedy == "") == (status == "ok"), check
    if status != "ok" and builds and gpu in "01":
        assert "make setup" in check.remedy, check
    if len(builds) == 2:
        assert "pip uninstall -y tensorflow tensorflow-cpu" in check.remedy, check


def test_each_variant_names_one_tensorflow_build_in_pyproject() -> None:
    """pyproject.toml's extras are the one list of what a variant installs: cpu is tensorflow-cpu where PyPI has
    that wheel (x86-64), else tensorflow; gpu is tensorflow[and-cuda]; only gpu lists tf-keras (see setup.sh)."""
    assert tensorflow_build.expected_build("cpu", "x86_64") == "tensorflow-cpu"
    assert tensorflow_build.expected_build("cpu", "aarch64") == "tensorflow"
    assert tensorflow_build.expected_build("gpu", "x86_64") == "tensorflow"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(line.startswith("tensorflow[and-cuda]") for line in extras["gpu"])
    assert not any(line.startswith("tf-keras") for line in extras["cpu"])
    assert any(line.startswith("tf-keras") for line in extras["gpu"])


def test_pip_checks_complaint_about_tf_keras_is_explained_only_by_a_tensorflow_cpu_it_admits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    line = "tf-keras 2.18.0 requires tensorflow, which is not installed."
    requires = {"tf-keras": ["tensorflow<2.19,>=2.18"], "other": ["tensorflow"]}
    monkeypatch.setattr(tensorflow_build.metadata, "requires", lambda dist: requires[dist])
    for installed, explained in (("2.18.1", True), ("2.19.0", False), (None, False)):
        monkeypatch.setattr(tensorflow_build, "_version", lambda name, v=installed: v if name == "tensorflow-cpu"
                            else None)
        assert tensorflow_build._explained(line) is explained, installed
    monkeypatch.setattr(tensorflow_build, "_version", lambda name: "2.18.1")
    assert not tensorflow_build._explained("tf-keras 2.18.0 requires numpy, which is not installed.")
    assert not tensorflow_build._explained("tf-keras 2.18.0 has requirement tensorflow<2.19, but you have x.")


def test_unmet_requirements_keeps_every_other_complaint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in interpreter answers `-m pip check` with two complaints; only the explained one is dropped."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'tf-keras 2.18.0 requires tensorflow, which is not installed.'\n"
                    "echo 'jupyterlab 4.6.6 requires httpx, which is not installed.'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(tensorflow_build, "_explained", lambda line: line.startswith("tf-keras"))
    assert tensorflow_build.unmet_requirements(str(fake)) == [
        "jupyterlab 4.6.6 requires httpx, which is not installed."]
    fake.write_text("#!/bin/sh\necho 'No broken requirements found.'\n")
    assert tensorflow_build.unmet_requirements(str(fake)) == []
    assert tensorflow_build.unmet_requirements(str(tmp_path / "none"))[0].startswith("pip check did not run")


def test_this_venv_is_consistent() -> None:
    """What set-up checks after its install: `pip check`, with tensorflow-cpu standing for tf-keras's tensorflow."""
    assert tensorflow_build.unmet_requirements() == []
