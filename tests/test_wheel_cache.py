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
    for part in ("$HVD_SDIST_SHA256", "$HVD_PATCH", "$variant", "$hvd_flags", "uname -m", '"$WHEEL_CACHE" built-against'):
        assert part in script[script.index('"$WHEEL_CACHE" key'):script.index("|| HVD_KEY=")], part


def _versions(installed: dict[str, str]):
    def version(name: str) -> str:
        if name not in installed:
            raise wheel_cache.metadata.PackageNotFoundError(name)
        return installed[name]
    return version


def test_a_build_against_tensorflow_cpu_never_matches_one_against_the_cuda_capable_wheel() -> None:
    """Both wheels install the same ``tensorflow`` package at the same version, but their libraries differ: the
    key names the build by distribution (issue 44), so set-up never installs a Horovod built against the other."""
    common = {"tf-keras": "2.18.0", "numpy": "2.0.2"}
    cpu = wheel_cache.built_against(_versions({"tensorflow-cpu": "2.18.1", **common}), python="3.12.1 (main)")
    cuda = wheel_cache.built_against(_versions({"tensorflow": "2.18.1", **common}), python="3.12.1 (main)")
    assert cpu == "3.12.1 (main) tensorflow==- tensorflow-cpu==2.18.1 tf-keras==2.18.0 numpy==2.0.2"
    assert cuda == "3.12.1 (main) tensorflow==2.18.1 tensorflow-cpu==- tf-keras==2.18.0 numpy==2.0.2"
    assert wheel_cache.key([*PARTS[:4], cpu]) != wheel_cache.key([*PARTS[:4], cuda])


def test_built_against_is_what_this_interpreter_has() -> None:
    line = subprocess.run([sys.executable, str(ROOT / "tools" / "wheel_cache.py"), "built-against"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert line == wheel_cache.built_against() and line.startswith(sys.version)
    assert all(f" {name}==" in line for name in wheel_cache.BUILT_AGAINST)
