"""tools/setup.sh: which Python it builds the venv from, and the Horovod patch it applies (issues 34, 53).

The interpreter is chosen on a fake PATH holding fake interpreters (shell scripts that answer set-up's
version probes and record the ``-m venv`` call, then stop set-up): no real venv is built. The rule (issue 53):
``PYTHON=`` wins, else the newest interpreter in pyproject.toml's requires-python that has venv and ensurepip;
tests/test_setup_python.py covers the machines with none (uv's CPython, the refusals) and the dry run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.environment import doctor_report, horovod_checks

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "tools" / "setup.sh"
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
# What set-up runs before it creates the venv (found on the real PATH, linked into the fake one).
TOOLS = ("bash", "cat", "cut", "date", "dirname", "dpkg-query", "grep", "head", "id", "sha256sum", "sort", "tr",
         "uname", "rm")
REAL_PYTHON = sys.executable


def _fake_python(folder: Path, name: str, version: tuple[int, int], venv: bool = True) -> None:
    """A fake interpreter: runs set-up's ``-c`` probes as Python ``version`` (without the venv and ensurepip
    modules when ``venv`` is false); ``-m venv`` is recorded and fails; anything else (the dry run's question to
    course_lib) is the real interpreter's."""
    script = folder / name
    hide = "sys.modules['ensurepip'] = sys.modules['venv'] = None; " if not venv else ""
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -m ] && [ "$2" = venv ]; then echo "$0 $*" >"{folder}/venv-call"; exit 3; fi\n'
        f'if [ "$1" = -c ]; then exec {REAL_PYTHON} -c "import sys; {hide}sys.version_info = '
        f'({version[0]}, {version[1]}, 0, \'final\', 0)\n$2"; fi\n'
        f'exec {REAL_PYTHON} "$@"\n')
    script.chmod(0o755)


def _run_setup(tmp_path: Path, pythons: dict[str, tuple[int, int]],
               extra_env: dict[str, str] | None = None,
               existing_bin: bool = False) -> tuple[subprocess.CompletedProcess[str], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=existing_bin)
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine for the test"
        (bin_dir / tool).symlink_to(found)
    for name, version in pythons.items():
        _fake_python(bin_dir, name, version)
    # COURSE_NO_FRAMEWORKS=1: notebook 07's second venv is set-up's own step, tested in test_frameworks_setup.py
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "COURSE_SKIP_APT": "1", "COURSE_GPU": "0",
           "COURSE_NO_FRAMEWORKS": "1", "COURSE_VENV": str(tmp_path / "venv"), **(extra_env or {})}
    proc = subprocess.run([str(bin_dir / "bash"), str(SETUP)], capture_output=True, text=True, env=env,
                          timeout=60)
    call = (bin_dir / "venv-call").read_text().strip() if (bin_dir / "venv-call").exists() else ""
    return proc, call


@pytest.mark.parametrize("pythons, chosen", [
    ({"python3.12": (3, 12), "python3.11": (3, 11), "python3": (3, 11)}, "python3.12"),  # the newest in range
    ({"python3.13": (3, 13), "python3.12": (3, 12), "python3": (3, 12)}, "python3.13"),  # 3.13 above 3.12
    ({"python3.11": (3, 11)}, "python3.11"),                                           # Debian 12
    ({"python3.12": (3, 12)}, "python3.12"),                                           # Ubuntu 24.04
    ({"python3": (3, 13)}, "python3"),                                                 # Debian 13's python3
    ({"python3": (3, 12)}, "python3"),                                                 # only `python3`
    ({"python3": (3, 13), "python3.11": (3, 11)}, "python3"),  # newest wins, whatever its name's place
    ({"python3": (3, 14), "python3.12": (3, 12)}, "python3.12"),  # Ubuntu 26.04's 3.14 is outside the range
    ({"python3.12": (3, 10), "python3.11": (3, 11)}, "python3.11"),  # a misnamed 3.10 is passed over
], ids=["3.12-over-3.11", "3.13-over-3.12", "only-3.11", "only-3.12", "python3-is-3.13", "python3-is-3.12",
        "newest-by-version", "3.14-passed-over", "wrong-3.12"])
def test_setup_takes_the_newest_python_in_range(tmp_path: Path, pythons: dict, chosen: str) -> None:
    proc, call = _run_setup(tmp_path, pythons)
    assert call == f"{tmp_path / 'bin' / chosen} -m venv {tmp_path / 'venv'}", proc.stdout + proc.stderr
    assert f"creating {tmp_path / 'venv'} with {chosen} (Python" in proc.stdout
    assert proc.returncode != 0  # the fake's venv step fails on purpose: nothing is installed
    assert not (tmp_path / "venv").exists()  # and the venv this run began is not left half-made


def test_a_newer_python_without_venv_is_passed_over(tmp_path: Path) -> None:
    """Debian's python3.13 without python3.13-venv cannot build the venv: the 3.12 that can is taken."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_python(bin_dir, "python3.13", (3, 13), venv=False)
    proc, call = _run_setup(tmp_path, {"python3.12": (3, 12)}, existing_bin=True)
    assert call.startswith(f"{bin_dir / 'python3.12'} -m venv"), proc.stdout + proc.stderr


def test_setup_finds_a_pyenv_3_12_whose_shim_is_not_selected(tmp_path: Path) -> None:
    """pyenv's ``python3.12`` shim fails while the global version is 3.11 (this machine): set-up asks
    ``pyenv root`` for the installed 3.12 and prefers it, so that CI runs 3.12 where both exist."""
    root = tmp_path / "pyenv"
    folder = root / "versions" / "3.12.1" / "bin"
    folder.mkdir(parents=True)
    _fake_python(folder, "python3.12", (3, 12))
    pyenv = tmp_path / "fakes" / "pyenv"
    pyenv.parent.mkdir()
    pyenv.write_text(f'#!/bin/sh\n[ "$1" = root ] && echo "{root}" && exit 0\nexit 1\n')
    pyenv.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pyenv").symlink_to(pyenv)
    shim = tmp_path / "bin" / "python3.12"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    proc, _ = _run_setup(tmp_path, {"python3.11": (3, 11)}, existing_bin=True)
    assert (folder / "venv-call").read_text().startswith(f"{folder / 'python3.12'} -m venv"), proc.stdout + proc.stderr
    assert f"with {folder / 'python3.12'} (Python 3.12)" in proc.stdout


def test_python_variable_overrides_the_search(tmp_path: Path) -> None:
    extra = tmp_path / "elsewhere"
    extra.mkdir()
    _fake_python(extra, "py311", (3, 11))
    proc, _ = _run_setup(tmp_path, {"python3.12": (3, 12)}, {"PYTHON": str(extra / "py311")})
    assert (extra / "venv-call").read_text().startswith(f"{extra / 'py311'} -m venv"), proc.stdout + proc.stderr
    assert f"with {extra / 'py311'} (Python 3.11)" in proc.stdout


def test_python_variable_with_a_wrong_version_is_refused(tmp_path: Path) -> None:
    extra = tmp_path / "elsewhere"
    extra.mkdir()
    _fake_python(extra, "py310", (3, 10))
    proc, _ = _run_setup(tmp_path, {"python3.12": (3, 12)}, {"PYTHON": str(extra / "py310")})
    assert proc.returncode == 1 and not (extra / "venv-call").exists()
    assert f"PYTHON={extra / 'py310'} is Python 3.10; the course needs >=3.11,<3.14 (Python 3.11 to 3.13)" in (
        proc.stderr), proc.stderr
    assert "Nothing was installed." in proc.stderr


# ---------------------------------------------------------------- the Horovod patch
PATCH = ROOT / "requirements" / "patches" / "horovod-0.28.1.patch"


def _file_sections(text: str) -> list[tuple[str, str]]:
    """(comment above, file) for each file the patch changes."""
    pieces = re.split(r"(?m)^--- a/(\S+)\n", text)
    return [(pieces[i - 1].split("\n@@")[-1].rsplit("\n+++", 1)[0] if i > 1 else pieces[0], pieces[i])
            for i in range(1, len(pieces), 2)]


def test_the_patch_is_for_the_pinned_horovod_and_each_hunk_names_its_upstream_issue() -> None:
    pinned = re.search(r"(?m)^horovod==(\S+)", CONSTRAINTS.read_text()).group(1)
    assert PATCH.name == f"horovod-{pinned}.patch"
    text = PATCH.read_text()
    sections = _file_sections(text)
    assert [f for _, f in sections] == ["horovod/common/common.h", "horovod/common/group_table.h",
                                        "horovod/tensorflow/keras/__init__.py",
                                        "horovod/tensorflow/keras/callbacks.py",
                                        "horovod/tensorflow/CMakeLists.txt", "horovod/tensorflow/xla_mpi_ops.cc",
                                        "third_party/flatbuffers/include/flatbuffers/stl_emulation.h"]
    for comment, path in sections:
        last_lines = comment.strip().splitlines()[-3:]
        assert any(re.search(r"horovod#\d+|PR #\d+", line) for line in last_lines), (
            f"the hunk for {path} needs a comment naming its upstream issue or PR")


def test_setup_and_the_doctor_check_the_line_the_patch_adds() -> None:
    added = [line[1:] for line in PATCH.read_text().splitlines() if line.startswith("+") and
             not line.startswith("+++")]
    assert any(line.strip().startswith(horovod_checks.HOROVOD_PATCH_MARKER) for line in added)
    setup = SETUP.read_text()
    assert f'HVD_PATCH_MARKER="{horovod_checks.HOROVOD_PATCH_MARKER}"' in setup
    assert "patch -p1 --dry-run" in setup and "does not apply" in setup
    assert re.search(r"HVD_SDIST_SHA256=[0-9a-f]{64}\n", setup)


def test_the_installed_horovod_carries_the_patch() -> None:
    patched, where = horovod_checks.horovod_patch_in_place()
    assert patched, f"{where} lacks the patch: COURSE_FORCE_SETUP=1 make setup"


def test_doctor_fails_with_remedy_when_the_patch_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(horovod_checks, "horovod_patch_in_place", lambda: (False, "/x/horovod/tensorflow/keras/callbacks.py"))
    monkeypatch.setattr(horovod_checks.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, 'KERAS {"keras2": true, "detail": "d", "horovod_backend": "tf_keras.api", "horovod_keras2": true}\n', ""))
    checks = {c.name: c for c in horovod_checks._check_keras2(horovod_ok=True)}
    assert checks["Horovod patch"].status == "fail"
    assert "COURSE_FORCE_SETUP=1 make setup" in checks["Horovod patch"].remedy
    assert "horovod-0.28.1.patch" in checks["Horovod patch"].remedy
    assert checks["Keras 2"].status == "ok"


def test_doctor_fails_when_tf_keras_is_keras_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(horovod_checks.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, 'KERAS {"keras2": false, "detail": "tf.keras is Keras 3.15.1"}\n', ""))
    checks = {c.name: c for c in horovod_checks._check_keras2(horovod_ok=False)}
    assert checks["Keras 2"].status == "fail" and "Keras 3.15.1" in checks["Keras 2"].detail
    assert "course_lib.training.keras2" in checks["Keras 2"].remedy
    assert "Horovod patch" not in checks  # Horovod's own failure is reported by its checks


def test_setup_script_has_no_syntax_error() -> None:
    assert subprocess.run(["bash", "-n", str(SETUP)], capture_output=True).returncode == 0
    assert os.access(SETUP, os.R_OK)


# ---------------------------------------------------------------- the TensorFlow build (issue 44: no red noise)
from course_lib.environment import tensorflow_build  # noqa: E402


def _nvidia_smi(folder: Path, listing: str) -> None:
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '%s' '{listing}'\n")
    smi.chmod(0o755)


@pytest.mark.parametrize("env, listing, variant, why", [
    ({}, None, "cpu", "nvidia-smi not found"),
    ({}, "", "cpu", "nvidia-smi lists no GPU"),
    ({}, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n", "gpu", "nvidia-smi lists 1 GPU(s): NVIDIA H100 80GB HBM3"),
    ({"COURSE_GPU": "0"}, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n", "cpu", "COURSE_GPU=0"),
    ({"COURSE_GPU": "1"}, None, "gpu", "COURSE_GPU=1"),
    ({"COURSE_GPU": ""}, None, "cpu", "nvidia-smi not found"),
], ids=["no-smi", "smi-no-gpu", "gpu", "forced-cpu", "forced-gpu", "empty"])
def test_the_variant_is_decided_in_one_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict,
                                             listing: str | None, variant: str, why: str) -> None:
    if listing is not None:
        _nvidia_smi(tmp_path, listing)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert tensorflow_build.tensorflow_variant(env) == (variant, why)


def test_a_wrong_course_gpu_is_refused_with_what_to_write() -> None:
    with pytest.raises(ValueError, match=r"COURSE_GPU='yes': use 1 .* 0 .* or leave it unset"):
        tensorflow_build.tensorflow_variant({"COURSE_GPU": "yes"})


def test_setup_asks_the_variant_and_decides_nothing_itself() -> None:
    code = [line for line in SETUP.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "nvidia-smi" in line or "COURSE_GPU" in line], (
        "tools/setup.sh must ask course_lib.environment.tensorflow_build for the variant, not decide it")
    assert any("tensorflow_build variant" in line for line in code)
    # uv and pip install the same two lists: the stack, then (cpu) tf-keras without its dependencies
    assert sum('"${STACK[@]}"' in line for line in code) == 2 and sum('"${KERAS2[@]}"' in line for line in code) == 2
    assert any('KERAS2=(--no-deps "tf-keras==$(pin tf_keras)")' in line for line in code)
    assert any("tensorflow_build check" in line for line in code)


def _fake_venv(tmp_path: Path, unwanted: str) -> tuple[Path, Path]:
    """A venv whose python records every call; pip calls succeed and install nothing, set-up's consistency check
    ends the run (status 1), ``unwanted`` answers which TensorFlow build is to go; course_lib's other questions
    (the variant) are answered by the real interpreter."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    calls = tmp_path / "calls"
    python = venv / "bin" / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >>"{calls}"\n'
        'case "$*" in\n'
        '  *"-m pip"*|*"-m compileall"*) exit 0 ;;\n'
        f'  *"tensorflow_build unwanted"*) echo "{unwanted}"; exit 0 ;;\n'
        '  *"tensorflow_build check"*) echo "stopped here by the test"; exit 1 ;;\n'
        "esac\n"
        f'exec {REAL_PYTHON} "$@"\n')
    python.chmod(0o755)
    return venv, calls


@pytest.mark.parametrize("listing, unwanted, variant", [
    (None, "", "cpu"),
    (None, "tensorflow", "cpu"),       # a venv made with the CUDA-capable wheel on a CPU machine: switched
    ("GPU 0: NVIDIA H100 (UUID: GPU-1)\n", "", "gpu"),
], ids=["cpu", "cpu-switch", "gpu"])
def test_setup_installs_the_build_of_its_variant(tmp_path: Path, listing: str | None, unwanted: str,
                                                 variant: str) -> None:
    """set-up on a fake venv (COURSE_NO_UV=1: pip): what it removes and installs, in order, for each variant."""
    venv, calls = _fake_venv(tmp_path, unwanted)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if listing is not None:
        _nvidia_smi(bin_dir, listing)
    env = {"COURSE_NO_UV": "1", "COURSE_GPU": "", "COURSE_PROFILE": "learner"}
    proc, _ = _run_setup(tmp_path, {}, {**env, "COURSE_VENV": str(venv)}, existing_bin=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "stopped here by the test" in out, out
    assert f"installing the pinned stack ({variant} build of TensorFlow" in out, out
    pip = [line.split("-m pip --disable-pip-version-check ", 1)[1]
           for line in calls.read_text().splitlines() if line.startswith("-m pip")]
    stack = f"install -q --no-compile -c {CONSTRAINTS} -e {ROOT}[{variant},lab]"
    keras2 = f"install -q --no-compile -c {CONSTRAINTS} --no-deps tf-keras=={doctor_report.pin('tf_keras')}"
    assert stack in pip, pip
    if variant == "cpu":
        assert pip.index(keras2) == pip.index(stack) + 1, pip
    else:
        assert keras2 not in pip, pip
    removed = [i for i, line in enumerate(pip) if line.startswith("uninstall")]
    if unwanted:
        assert len(removed) == 1 and pip[removed[0]] == f"uninstall -q -y {unwanted} tf-keras horovod", pip
        assert removed[0] < pip.index(stack) and f"removing {unwanted}, tf-keras and Horovod" in out
    else:
        assert removed == [], pip


def test_an_interrupted_set_up_ends_notebook_07s_venv_build_it_started(tmp_path: Path) -> None:
    """Notebook 07's venv is built in the background while steps 4-6 run; Ctrl+C (SIGINT to set-up) during those
    steps ends that build and every process it started, and set-up exits 130. Fakes: the course venv's python passes
    step 3's check and then stalls in step 4 (the wheel cache's key); .venv-07's python stalls in its first pip
    call, writing its pid first."""
    import signal
    import time

    venv, _calls = _fake_venv(tmp_path, "")
    python = venv / "bin" / "python"
    python.write_text(python.read_text().replace(
        '*"tensorflow_build check"*) echo "stopped here by the test"; exit 1 ;;',
        '*"tensorflow_build check"*) exit 0 ;;\n  *"wheel_cache.py"*) sleep 60; exit 1 ;;'))
    fw = tmp_path / "venv-07"
    (fw / "bin").mkdir(parents=True)
    pid_file = tmp_path / "fw.pid"
    (fw / "bin" / "python").write_text(f'#!/bin/sh\necho $$ >"{pid_file}"\nexec sleep 60\n')
    (fw / "bin" / "python").chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in (*TOOLS, "setsid", "sleep", "mktemp"):   # set-up's commands up to step 4, and the fakes'
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine for the test"
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "COURSE_SKIP_APT": "1", "COURSE_GPU": "0",
           "COURSE_NO_UV": "1", "COURSE_PROFILE": "learner", "COURSE_VENV": str(venv),
           "COURSE_FRAMEWORKS_VENV": str(fw)}
    proc = subprocess.Popen([str(bin_dir / "bash"), str(SETUP)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[0]
            time.sleep(0.1)
        fw_pid = int(pid_file.read_text())
        assert Path(f"/proc/{fw_pid}").exists()      # the background build is running
        os.killpg(proc.pid, signal.SIGINT)            # Ctrl+C: the terminal signals set-up's process group
        out = proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    deadline = time.monotonic() + 10
    while Path(f"/proc/{fw_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{fw_pid}").exists(), f"notebook 07's venv build (pid {fw_pid}) outlived set-up"
