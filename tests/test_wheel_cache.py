"""tools/wheel_cache.py: set-up's cache of the Horovod wheel it built (issue 31: the check's time).

The key must change with every input of the build (a stale wheel would be installed otherwise), a store cut
short must leave nothing that ``find`` returns, and set-up must check a cached wheel as it checks a build.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import wheel_cache  # noqa: E402

PARTS = ["92a43f5a", "cpu", "mpi", "x86_64", "3.12.1 tensorflow==2.18.1"]


def test_the_key_changes_with_every_input_and_with_the_patch_content(tmp_path: Path) -> None:
    patch = tmp_path / "horovod.patch"
    patch.write_text("--- a\n+++ b\n")
    base = wheel_cache.key([*PARTS, str(patch)])
    assert base == wheel_cache.key([*PARTS, str(patch)])
    for i in range(len(PARTS)):
        changed = [*PARTS]
        changed[i] += "x"
        assert wheel_cache.key([*changed, str(patch)]) != base, PARTS[i]
    patch.write_text("--- a\n+++ b\n+one more line\n")
    assert wheel_cache.key([*PARTS, str(patch)]) != base
    with pytest.raises(ValueError, match="inputs"):
        wheel_cache.key([])


def test_store_then_find_then_drop(tmp_path: Path) -> None:
    wheel = tmp_path / "horovod-0.28.1-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(b"PK fake")
    root = tmp_path / "cache"
    assert wheel_cache.find("k1", root) is None
    kept = wheel_cache.store("k1", wheel, root)
    assert wheel_cache.find("k1", root) == kept and kept.read_bytes() == b"PK fake"
    assert wheel_cache.find("k2", root) is None
    wheel_cache.drop("k1", root)
    assert wheel_cache.find("k1", root) is None
    with pytest.raises(FileNotFoundError):
        wheel_cache.store("k1", tmp_path / "missing.whl", root)


def test_a_store_cut_short_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "horovod-0.28.1-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(b"PK fake")
    root = tmp_path / "cache"

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copy2", interrupted)
    with pytest.raises(KeyboardInterrupt):
        wheel_cache.store("k1", wheel, root)
    assert wheel_cache.find("k1", root) is None and list(root.iterdir()) == []


def test_the_cli_and_the_folder_it_uses(tmp_path: Path) -> None:
    env = {"COURSE_BUILD_CACHE": str(tmp_path / "c"), "PATH": "/usr/bin:/bin"}
    assert wheel_cache.cache_dir(env) == tmp_path / "c"
    assert wheel_cache.cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/course-dl")
    tool = [sys.executable, str(ROOT / "tools" / "wheel_cache.py")]
    miss = subprocess.run([*tool, "find", "abc"], env=env, capture_output=True, text=True)
    assert miss.returncode == 1 and miss.stdout == ""
    assert subprocess.run([*tool, "nonsense"], env=env, capture_output=True).returncode == 2


def test_setup_installs_a_cached_wheel_only_after_the_checks_of_a_build() -> None:
    """The cached branch runs the same probes as a build (TensorFlow and Gloo load, the patch line is there),
    drops a wheel that fails them, and COURSE_NO_BUILD_CACHE=1 turns the cache off."""
    script = (ROOT / "tools" / "setup.sh").read_text()
    cached = script[script.index('cached=$("$VENV/bin/python" "$WHEEL_CACHE" find'):]
    cached = cached[:cached.index("then")]
    assert "hvd_has_tf" in cached and "hvd_patched" in cached
    # a wheel comes without its dependencies unless pip installs them (a first try with --no-deps left
    # cloudpickle out and the probe failed): every install of a horovod wheel takes the constraints
    installs = [line for line in script.splitlines() if "install -q" in line and ("whl" in line or "$cached" in line)]
    assert len(installs) == 2 and all("--no-deps" not in line and '-c "$CONSTRAINTS"' in line for line in installs)
    assert '"$WHEEL_CACHE" drop "$HVD_KEY"' in script and "COURSE_NO_BUILD_CACHE" in script
    for part in ("$HVD_SDIST_SHA256", "$HVD_PATCH", "$variant", "$hvd_flags", "uname -m", "sys.version"):
        assert part in script[script.index('"$WHEEL_CACHE" key'):script.index("|| HVD_KEY=")], part
