"""Notebook 07's second venv: tools/setup_frameworks.sh, its pins, where it is found, and the doctor's line.

The real .venv-07 (the ``frameworks-venv`` component, built by ``make setup``) is asked what it holds; the script's
fast path (its stamp) and its refusals run for real; the doctor's verdict is flipped with made-up answers.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from course_lib.environment import frameworks, tensorflow_build
from course_lib.environment.doctor import check_frameworks

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "setup_frameworks.sh"
PINS = ROOT / "requirements" / "frameworks.txt"


def pins() -> dict[str, str]:
    found = {}
    for line in PINS.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)$", line.strip())
        if match:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def test_the_pins_name_torch_without_a_build_label_and_the_frameworks_the_notebook_uses():
    found = pins()
    assert found["torch"] == "2.13.0"  # admits 2.13.0+cpu and the CUDA build alike
    assert {"jax", "jaxlib", "keras", "numpy", "pip"} <= set(found)
    assert found["jax"] == found["jaxlib"]
    assert not {"tensorflow", "tensorflow-cpu", "horovod"} & set(found)  # the course's stack stays in .venv


def test_the_course_set_up_calls_it_on_both_paths_and_after_uv():
    """A second `make setup` (the course venv's stamp present) still checks .venv-07; a first one builds it after
    step 3, where uv has been installed for it (tools/setup_frameworks.sh uses the course venv's uv)."""
    setup = (ROOT / "tools" / "setup.sh").read_text()
    define = setup.index('frameworks() { COURSE_VENV=$VENV bash "$ROOT/tools/setup_frameworks.sh" "$variant"; }')
    fast = setup.index('if [ -f "$STAMP" ]', define)
    fast_end = setup.index("exit 0", fast)
    assert "\n    frameworks\n" in setup[fast:fast_end]
    uv = setup.index('"${PIP[@]}" install -q "uv==$(pin uv)"')
    step4 = setup.index("# --- 4. Horovod")
    background = setup.index('COURSE_VENV=$VENV setsid bash "$ROOT/tools/setup_frameworks.sh" "$variant" >"$FW_LOG" 2>&1 &')
    assert uv < background < step4   # after uv, beside steps 4-6
    waited = setup.index('wait "$FW_PID" || fw_status=$?')
    assert waited < setup.index('date -u +%FT%TZ > "$STAMP"')   # no stamp before it ended well
    assert "trap cleanup EXIT" in setup and 'kill -TERM -- "-$FW_PID"' in setup   # an interrupt ends it


def run_script(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env})


def test_it_refuses_a_bad_variant_and_can_be_skipped(tmp_path):
    bad = run_script("tpu", COURSE_FRAMEWORKS_VENV=str(tmp_path / "v"))
    assert bad.returncode != 0 and "variant tpu" in bad.stderr
    skipped = run_script("cpu", COURSE_NO_FRAMEWORKS="1", COURSE_FRAMEWORKS_VENV=str(tmp_path / "v"))
    assert skipped.returncode == 0 and "not set up" in skipped.stdout and not (tmp_path / "v").exists()


@pytest.mark.requires("frameworks-venv")
def test_a_second_run_returns_at_once_on_its_stamp():
    venv = Path(frameworks.frameworks_python()).parents[1]
    # The script runs for real on that venv: one built by another checkout (its course_lib path file names that
    # checkout) would be rebuilt from this one's files, its course_lib path moved here.
    paths = list(venv.glob("lib/python3*/site-packages/course_lib_path.pth"))
    assert paths and paths[0].read_text().strip() == str(ROOT), (
        f"{venv} is not this checkout's notebook 07 venv ({paths[0].read_text().strip() if paths else 'no path file'}"
        f" is its course): run make setup here, or deselect this test")
    # The variant set-up passed: this machine's TensorFlow build (tools/setup.sh asks the same function), not the
    # torch found: a CPU machine with no CPU build of torch in reach (Debian 13) holds PyPI's CUDA build.
    variant = tensorflow_build.tensorflow_variant()[0]
    start = time.monotonic()
    again = run_script(variant, COURSE_FRAMEWORKS_VENV=str(venv))
    took = time.monotonic() - start
    assert again.returncode == 0, again.stderr
    assert again.stdout == "" and took < 2.0, (again.stdout, took)


@pytest.mark.requires("frameworks-venv")
def test_the_venv_holds_the_pinned_versions_with_gloo():
    found = frameworks.frameworks_versions()
    expected = pins()
    assert str(found["torch"]).split("+")[0] == expected["torch"]
    assert found["jax"] == expected["jax"] and found["keras"] == expected["keras"]
    assert found["gloo"] is True and found["keras_backend"] == "jax"
    assert check_frameworks(found).status == "ok"


def test_where_the_venv_is_found(monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_FRAMEWORKS_VENV", raising=False)
    monkeypatch.setenv("COURSE_VENV", "/x/.venv/")
    assert frameworks.frameworks_venv() == Path("/x/.venv-07")
    monkeypatch.setenv("COURSE_FRAMEWORKS_VENV", str(tmp_path / "fw"))
    assert frameworks.frameworks_venv() == tmp_path / "fw"
    assert frameworks.frameworks_python(required=False) is None
    with pytest.raises(FileNotFoundError, match="make setup"):
        frameworks.frameworks_python()
    assert "make setup" in frameworks.frameworks_versions()["error"]


def test_the_doctor_line_flips_with_what_the_venv_answers():
    good = {"torch": "2.13.0+cpu", "cuda": None, "gloo": True, "nccl": False, "jax": "0.10.2", "keras": "3.15.1",
            "keras_backend": "jax"}
    assert check_frameworks(good).status == "ok" and "CPU build" in check_frameworks(good).detail
    assert check_frameworks({**good, "gloo": False}).status == "fail"
    assert check_frameworks({"error": "missing"}).status == "fail"
    assert "CUDA 12.8" in check_frameworks({**good, "cuda": "12.8"}).detail


def _choose(tmp_path: Path, pythons: dict, base: tuple[int, int] | None = None) -> tuple[str, str]:
    """Run the script on a fake PATH of fake interpreters (tests/test_setup_script.py's: they record ``-m venv``
    and fail it, so the script stops there); ``base``: the course venv's python is a fake of that version."""
    import shutil
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_setup_script import TOOLS, _fake_python

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    for name, version in pythons.items():
        _fake_python(bin_dir, name, version)
    main_venv = tmp_path / "venv"
    if base:
        (main_venv / "bin").mkdir(parents=True)
        _fake_python(main_venv / "bin", "python", base)
        fake = main_venv / "bin" / "python"   # its sys._base_executable: itself, a fake too (never a real Python)
        fake.write_text(fake.read_text().replace("sys.version_info = ", "sys._base_executable = '$0'; "
                                                 "sys.version_info = "))
    # A session of its own, ended whole if it outlives the limit: nothing it started is left behind.
    with subprocess.Popen([str(bin_dir / "bash"), str(SCRIPT), "cpu"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True,
                          env={"PATH": str(bin_dir), "HOME": str(tmp_path), "COURSE_VENV": str(main_venv),
                               "COURSE_FRAMEWORKS_VENV": str(tmp_path / "fw")}) as proc:
        try:
            out = proc.communicate(timeout=60)[0]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    calls = [p.read_text().split(" -m venv")[0] for p in (bin_dir / "venv-call", main_venv / "bin" / "venv-call")
             if p.exists()]
    assert not (tmp_path / "fw").exists(), "a real venv was made: the fakes must stop the script"
    return (calls[0] if calls else ""), out


@pytest.mark.parametrize("pythons, base, chosen", [
    ({"python3.11": (3, 11), "python3.13": (3, 13)}, None, "bin/python3.11"),   # the cp311 torch build
    ({"python3.13": (3, 13), "python3": (3, 14)}, None, "bin/python3.13"),      # Debian 13: no 3.11 there
    ({"python3.12": (3, 12), "python3.13": (3, 13)}, None, "bin/python3.13"),   # the newest in range
    ({"python3": (3, 14)}, (3, 13), "venv/bin/python"),                        # Ubuntu 26.04: .venv's uv CPython
], ids=["3.11-preferred", "3.13-only", "newest", "venv-base"])
def test_notebook_07s_venv_takes_3_11_else_the_newest_in_range_else_the_course_venvs(
        tmp_path: Path, pythons: dict, base: tuple[int, int] | None, chosen: str) -> None:
    call, out = _choose(tmp_path, pythons, base)
    assert call == str(tmp_path / chosen), out


def test_notebook_07s_venv_refuses_with_the_range_when_there_is_no_python_in_it(tmp_path: Path) -> None:
    call, out = _choose(tmp_path, {"python3": (3, 14)}, base=(3, 10))
    assert call == "" and "no Python >=3.11,<3.14 with venv for notebook 07's venv" in out, out
