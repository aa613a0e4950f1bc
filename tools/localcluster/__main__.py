"""``python -m tools.localcluster up|down|status``: the local cluster for a rehearsal (cluster/README.md).

``up`` starts a one-node Slurm (:mod:`tools.localcluster.slurm`) and the two ssh hosts
(:mod:`tools.localcluster.hosts`), leaves them running, and prints how to use them; ``down`` stops
everything it started (daemons, namespaces, link, keys, folders); ``status`` says what runs. The state
lives in ``$COURSE_LOCALCLUSTER_DIR`` (default ``/run/course-localcluster``). Root only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from tools.localcluster.common import LocalClusterError
from tools.localcluster.hosts import LocalHosts
from tools.localcluster.slurm import LocalSlurm

STATE = Path(os.environ.get("COURSE_LOCALCLUSTER_DIR", "/run/course-localcluster"))
TAG = "cli"


def up() -> int:
    if (STATE / "slurm" / "state.json").exists() or (STATE / "hosts" / "state.json").exists():
        print(f"already up (state in {STATE}); `python -m tools.localcluster down` first", file=sys.stderr)
        return 1
    STATE.mkdir(parents=True, exist_ok=True)
    slurm = LocalSlurm(STATE / "slurm").start()
    try:
        hosts = LocalHosts(tag=TAG, workdir=STATE / "hosts").start()
    except BaseException:
        slurm._own_workdir = True
        slurm.stop()
        raise
    a = hosts.host("hostA")
    print(f"""Slurm: one node {slurm.node} ({slurm.cpus} CPUs), partition debug (MaxTime 00:10:00)
    export SLURM_CONF={slurm.workdir}/slurm.conf
    sinfo
    sbatch --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=00:05:00 --output=/tmp/%x-%j.out \\
        cluster/slurm_horovod.sbatch --epochs 1 --train-subset 2048 --json
Two ssh hosts: {', '.join(f'{h.name} ({h.address}, namespace {h.namespace})' for h in hosts.hosts)}
    ip netns exec {a.namespace} env PATH={hosts.workdir}/bin:$PATH \\
        .venv/bin/horovodrun -np 2 -H {hosts.host_list()} --gloo --network-interface clc0 \\
        .venv/bin/python source_code/horovod_fmnist.py --epochs 1 --train-subset 2048 --threads-per-worker 1 --json
    ip -n {hosts.host('hostB').namespace} link set clc0 down     # the fault; `up` brings it back
Stop everything: python -m tools.localcluster down""")
    return 0


def down() -> int:
    stopped = []
    if (STATE / "hosts" / "state.json").exists():
        LocalHosts.from_state(STATE / "hosts").stop()
        stopped.append("hosts")
    if (STATE / "slurm" / "state.json").exists():
        LocalSlurm.from_state(STATE / "slurm").stop()
        stopped.append("slurm")
    shutil.rmtree(STATE, ignore_errors=True)
    print(f"stopped: {', '.join(stopped) or 'nothing was up'}")
    return 0


def status() -> int:
    if not STATE.exists():
        print("down")
        return 1
    if (STATE / "slurm" / "state.json").exists():
        slurm = LocalSlurm.from_state(STATE / "slurm")
        print(slurm.command("sinfo", check=False).stdout.rstrip() or "slurm: not answering")
    if (STATE / "hosts" / "state.json").exists():
        hosts = LocalHosts.from_state(STATE / "hosts")
        for host in hosts.hosts:
            alive = Path(f"/proc/{hosts.sshd_pids.get(host.name, 0)}").exists()
            print(f"{host.name} {host.address} namespace {host.namespace}: sshd {'up' if alive else 'DOWN'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.localcluster", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    try:
        return {"up": up, "down": down, "status": status}[args.action]()
    except LocalClusterError as exc:
        print(f"localcluster: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
