"""A real one-node Slurm cluster on this machine: munged, slurmctld and slurmd, all state in one folder.

:class:`LocalSlurm` writes a fresh 1 KiB munge key and starts ``munged`` on its own socket, writes a
``slurm.conf`` whose only node is this machine (its host name and the CPU count and memory that
``slurmd -C`` reports), and starts ``slurmctld`` and ``slurmd`` in the foreground with state, spool,
logs and pid files in the folder and private ports. The Slurm commands find it through
``SLURM_CONF`` (:meth:`LocalSlurm.env`). :meth:`LocalSlurm.stop` cancels every job, ends the daemons
(and any ``slurmstepd`` they left) and waits for them, then removes the folder: nothing stays.

The settings that mattered on Debian 12 (slurm-wlm 22.05, munge 0.5.15; see /work/shared/FACTS.md):
``AuthInfo=socket=...`` (munge on a private socket), ``SlurmUser=root``, ``ProctrackType=proctrack/linuxproc``
and ``TaskPlugin=task/none`` (no cgroup set-up needed), ``SelectType=select/cons_tres``. Accounting
has no database here: ``sacct`` reads the job-completion log (``JobCompType=jobcomp/filetxt``,
``sacct --completion``), and ``scontrol show job`` keeps finished jobs for ``MinJobAge`` seconds.

The partition ``debug`` allows jobs of at most :data:`MAX_TIME`; a job asking for more stays PENDING
with ``Reason=PartitionTimeLimit`` forever, which :mod:`tools.localcluster.slurm_jobs` turns into an error.

Needs root; :meth:`LocalSlurm.start` refuses with the remedy otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from course_lib.runner.procs.watchdog import end_tree
from tools.localcluster.common import LocalClusterError, require_programs, require_root, run, tail

__all__ = ["LocalSlurm", "MAX_TIME", "PARTITION"]

PARTITION = "debug"
MAX_TIME = "00:10:00"
PROGRAMS = ["munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel", "sacct"]


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def node_line() -> str:
    """This machine's ``NodeName=... CPUs=... RealMemory=...`` as ``slurmd -C`` prints it."""
    done = run([require_programs("Slurm", ["slurmd"])["slurmd"], "-C"], timeout=20)
    for line in done.stdout.splitlines():
        if line.startswith("NodeName="):
            return line.strip()
    raise LocalClusterError(f"slurmd -C printed no NodeName line: {done.stdout!r}")


class LocalSlurm:
    """One-node Slurm (context manager, or :meth:`start` / :meth:`stop`).

    Args:
        workdir: The folder for everything (default: a new temporary folder, removed by stop).
    """

    def __init__(self, workdir: Path | None = None) -> None:
        self.workdir = workdir
        self._own_workdir = workdir is None
        self.pids: dict[str, int] = {}
        self._procs: dict[str, subprocess.Popen] = {}
        self.node = ""
        self.cpus = 0
        self.started_at = 0.0

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ start
    def start(self) -> "LocalSlurm":
        """Start munged, slurmctld and slurmd; return once ``sinfo`` shows the node idle (bounded)."""
        require_root("a local Slurm cluster")
        self.tools = require_programs("a local Slurm cluster", PROGRAMS)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="course-slurm-"))
        d = self.workdir
        for sub in ("state", "spool", "munge"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(d / "munge", 0o700)
        self.started_at = time.time()
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", [self.tools["munged"], "--foreground", "--force", f"--key-file={key}",
                               f"--socket={self.socket}", f"--pid-file={d / 'munge' / 'munged.pid'}",
                               f"--log-file={d / 'munge' / 'munged.log'}",
                               f"--seed-file={d / 'munge' / 'munged.seed'}"])
        self._wait(lambda: run([self.tools["munge"], "-n", "-S", str(self.socket)], check=False).returncode == 0,
                   10, "munged answering on its socket", d / "munge" / "munged.log")
        line = node_line()
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        self.node, self.cpus = fields["NodeName"], int(fields["CPUs"])
        ctld_port, slurmd_port = _free_ports(2)
        (d / "slurm.conf").write_text(f"""# Written by tools/localcluster/slurm.py (a one-node cluster for the course's tests)
ClusterName=course
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d / 'state'}
SlurmdSpoolDir={d / 'spool'}
SlurmctldPidFile={d / 'slurmctld.pid'}
SlurmdPidFile={d / 'slurmd.pid'}
SlurmctldLogFile={d / 'slurmctld.log'}
SlurmdLogFile={d / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MinJobAge=600
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={d / 'jobcomp.log'}
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MessageTimeout=5
{line.split(' UpTime=')[0]} State=UNKNOWN
PartitionName={PARTITION} Nodes={self.node} Default=YES MaxTime={MAX_TIME} State=UP
""")
        env = self.env()
        self._spawn("slurmctld", [self.tools["slurmctld"], "-D", "-i", "-f", str(d / "slurm.conf")], env)
        self._spawn("slurmd", [self.tools["slurmd"], "-D", "-f", str(d / "slurm.conf")], env)
        self._wait(self._node_ready, 30, f"node {self.node} idle in sinfo", d / "slurmctld.log")
        self._save_state()

    @property
    def socket(self) -> Path:
        """munged's private socket."""
        assert self.workdir is not None
        return self.workdir / "munge" / "munge.socket"

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        assert self.workdir is not None
        with open(self.workdir / f"{name}.out", "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
        self._procs[name], self.pids[name] = proc, proc.pid

    def _wait(self, ready, timeout: float, what: str, log: Path) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # bounded
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise LocalClusterError(
                        f"{name} exited with status {proc.returncode} while waiting for {what}: "
                        f"{tail(self.workdir / f'{name}.out')} {tail(log)}")  # type: ignore[operator]
            if ready():
                return
            time.sleep(0.3)
        raise LocalClusterError(f"{what}: not within {timeout:g} s; log: {tail(log)}")

    def _node_ready(self) -> bool:
        done = run([self.tools["sinfo"], "-h", "-N", "-o", "%N %t"], env=self.env(), check=False, timeout=10)
        return done.returncode == 0 and any(line.split()[1:] == ["idle"] for line in done.stdout.splitlines())

    def _save_state(self) -> None:
        assert self.workdir is not None
        (self.workdir / "state.json").write_text(json.dumps(
            {"workdir": str(self.workdir), "pids": self.pids, "node": self.node, "cpus": self.cpus,
             "started_at": self.started_at}, indent=1))

    @classmethod
    def from_state(cls, workdir: Path) -> "LocalSlurm":
        """The cluster started (by ``python -m tools.localcluster up``) with its files in ``workdir``."""
        state = json.loads((workdir / "state.json").read_text())
        slurm = cls(workdir)
        slurm._own_workdir = True
        slurm.tools = require_programs("a local Slurm cluster", PROGRAMS)
        slurm.pids = {k: int(v) for k, v in state["pids"].items()}
        slurm.node, slurm.cpus, slurm.started_at = state["node"], state["cpus"], state["started_at"]
        return slurm

    # ------------------------------------------------------------------ use
    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment in which the Slurm commands talk to this cluster (``SLURM_CONF``)."""
        assert self.workdir is not None
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.workdir / "slurm.conf")
        return env

    def command(self, name: str, *args: str, timeout: float = 20, check: bool = True) -> subprocess.CompletedProcess:
        """Run one Slurm command (``sinfo``, ``squeue``, ...) against this cluster."""
        return run([self.tools[name], *args], env=self.env(), timeout=timeout, check=check)

    def stop_slurmd(self) -> None:
        """End slurmd only (a fault drill: the node then stops answering)."""
        pid = self.pids.pop("slurmd", None)
        if pid is not None:
            _end(pid, self._procs.pop("slurmd", None))

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Cancel every job, end slurmd, slurmctld, munged and leftover slurmstepd, wait, remove the
        folder. Safe to call twice, or after a failed start."""
        tools = getattr(self, "tools", {})
        if "slurmctld" in self.pids and "slurmd" in self.pids and "scancel" in tools:
            # (Without slurmd no job can end cleanly: its daemons are ended below, slurmstepd included.)
            run([tools["scancel"], "--full", f"--partition={PARTITION}"], env=self.env(), check=False, timeout=10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # bounded: jobs end within KillWait
                done = run([tools["squeue"], "-h", "-o", "%i"], env=self.env(), check=False, timeout=10)
                if done.returncode != 0 or not done.stdout.strip():
                    break
                time.sleep(0.3)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.pop(name, None)
            if pid is not None:
                _end(pid, self._procs.pop(name, None))
        for pid in slurmstepds_since(self.started_at):
            _end(pid, None)
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def slurmstepds_since(started_at: float) -> list[int]:
    """``slurmstepd`` processes started after ``started_at`` (ours: the machine has no other Slurm)."""
    out = []
    ticks = os.sysconf("SC_CLK_TCK")
    boot = _boot_time()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "slurmstepd":
                continue
            start = boot + int((entry / "stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
        except (OSError, IndexError, ValueError):
            continue
        if start >= started_at - 1:
            out.append(int(entry.name))
    return out


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def _end(pid: int, proc: subprocess.Popen | None, grace: float = 5.0) -> None:
    """SIGTERM, wait up to ``grace`` s, then SIGKILL; reap it when it is our child."""
    end_tree([proc if proc is not None else pid], grace_s=(0.0, grace), interrupt=False, kill_s=3.0)
    if proc is not None:
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
