"""A machine whose only Python is 3.13 (as Debian 13 is) sets up to a working lab (issue 53).

Every other Python of this machine is hidden in a private mount namespace (``unshare -m``: an empty file or folder
bind-mounted over /usr/bin/python3.X, /usr/local/bin's Pythons and pyenv's other versions), and ``make setup``
runs in a fresh copy of the course (its tracked files, in a scratch folder) as a learner would, without apt
(COURSE_SKIP_APT=1: the test changes no system package) and without notebook 07's venv (COURSE_NO_FRAMEWORKS=1:
torch for 3.13 on a CPU machine that reaches only PyPI is the CUDA build, several GB; the doctor's one line about
it is the only failure allowed). Then the doctor passes and a 2-worker Horovod run (Gloo, an allreduce through
TensorFlow) completes. Horovod's wheel cache (``~/.cache/course-dl``, tools/wheel_cache.py) is this machine's, so
the second run of this test installs the wheel the first one built.

Needs root (the mounts) and TensorFlow wheels for Python 3.13 in the course's pins (TensorFlow >= 2.20).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv"))
KEPT = "3.13"
ALLREDUCE = textwrap.dedent("""\
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    total = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum)
    print(f"rank {hvd.rank()} of {hvd.size()}: sum {float(total.numpy()[0])}", flush=True)
""")


def _fresh_copy(dest: Path) -> None:
    """The course's tracked files as they are in this checkout (no venv, no build/, no caches)."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def _hidden() -> list[Path]:
    """Every Python of this machine but the 3.13s: what the namespace covers."""
    found = [p for p in Path("/usr/bin").glob("python3*") if not p.name.startswith(f"python{KEPT}")]
    found += [p for p in Path("/usr/local/bin").glob("python*") if not p.name.startswith(f"python{KEPT}")]
    found += [p for p in (PYENV / "versions").glob("*") if not p.name.startswith(f"{KEPT}.")]
    return sorted(p for p in found if p.exists() and not p.is_symlink())


@pytest.mark.horovod
@pytest.mark.slow
def test_a_313_only_machine_runs_make_setup_to_a_working_lab(tmp_path: Path) -> None:
    assert os.geteuid() == 0 and shutil.which("unshare"), "needs root and unshare (util-linux) for the mounts"
    assert list((PYENV / "versions").glob(f"{KEPT}.*/bin/python{KEPT}")) or shutil.which(f"python{KEPT}"), (
        f"needs a Python {KEPT}: pyenv install {KEPT}")
    course = tmp_path / "course"
    _fresh_copy(course)
    (tmp_path / "allreduce.py").write_text(ALLREDUCE)
    empty_dir, empty_file = tmp_path / "empty", tmp_path / "empty-file"
    empty_dir.mkdir()
    empty_file.write_text("")
    mounts = "\n".join(f"mount --bind {empty_dir if p.is_dir() else empty_file} {p}" for p in _hidden())
    script = tmp_path / "machine.sh"
    script.write_text(textwrap.dedent("""\
        set -euo pipefail
        {mounts}
        cd {course}
        for p in python3 python3.10 python3.11 python3.12; do
            if command -v "$p" >/dev/null && "$p" -c 1 2>/dev/null; then echo "NOT HIDDEN: $p"; exit 9; fi
        done
        make setup SETUP_PROFILE=learner
        echo "=== doctor"
        .venv/bin/python -m course_lib doctor || true
        echo "=== horovod"
        timeout 600 .venv/bin/horovodrun --gloo -np 2 -H localhost:2 .venv/bin/python {allreduce}
        echo "=== python"
        .venv/bin/python -c 'import sys; print(*sys.version_info[:2], sep=".")'
        """).format(mounts=mounts, course=course, allreduce=tmp_path / "allreduce.py"))
    env = {"PATH": f"{PYENV / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8", "COURSE_SKIP_APT": "1",
           "COURSE_NO_FRAMEWORKS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
           **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "PYENV_ROOT", "SSL_CERT"))}}
    # A session of its own, ended whole when it outlives its limit: no build or rank is left behind.
    with subprocess.Popen(["unshare", "-m", "--propagation", "private", "bash", str(script)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as proc:
        try:
            out = proc.communicate(timeout=3600)[0]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 0, out[-6000:]
    assert f"[setup] Python: found Python {KEPT}:" in out, out[-6000:]
    # Horovod through the machine's wheel cache: the wheel an earlier set-up built, or this one's, kept for the next
    assert ("installed from the wheel this machine built before" in out
            or "kept the wheel for the next set-up on this machine" in out), out[-6000:]
    (tmp_path / "machine.log").write_text(out)   # what the run printed, kept with pytest's last three tmp folders
    doctor = out.split("=== doctor", 1)[1].split("=== horovod", 1)[0]
    failing = [line for line in doctor.splitlines() if line.startswith("[FAIL]")]
    assert [line for line in failing if "notebook 07" not in line] == [], doctor
    assert "[  ok] Python: 3.13" in doctor and "[  ok] Horovod build: built with TensorFlow, Gloo" in doctor, doctor
    ranks = out.split("=== horovod", 1)[1].split("=== python", 1)[0]
    assert "rank 0 of 2: sum 3.0" in ranks and "rank 1 of 2: sum 3.0" in ranks, ranks
    assert out.rstrip().endswith(KEPT)
