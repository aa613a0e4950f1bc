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

from course_lib.environment import frameworks
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
    variant = "gpu" if frameworks.frameworks_versions().get("cuda") and not str(
        frameworks.frameworks_versions()["torch"]).endswith("+cpu") else "cpu"
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
