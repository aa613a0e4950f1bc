"""Two ssh "hosts" on this machine: two network namespaces joined by one veth pair, an sshd in each.

``hostA`` (10.251.0.1) and ``hostB`` (10.251.0.2) each have their own network stack: a loopback and
one end of a veth pair named ``clc0`` in both (Horovod looks for interfaces with the same name on every
host), a /30 on the pair and no other route: no default route, no NAT, no forwarding, no bridge to the
machine's interfaces, so traffic can only pass between the two namespaces. Each runs ``sshd`` on its
own address (port 22 of its own stack) with a throw-away host key; a throw-away user key, a
``known_hosts`` and an ssh config (``Host hostA`` -> ``HostName 10.251.0.1``) live in a temporary
folder, and an ``ssh`` wrapper there (first on the launcher's ``PATH``) uses that config, so neither
``~/.ssh`` nor ``/etc/ssh`` is touched. The names resolve inside the namespaces through
``/etc/netns/<namespace>/hosts`` (``ip netns exec`` shows it as ``/etc/hosts``).

The wrapper forces a pseudo-terminal (``RequestTTY force``, what ``ssh -tt`` does): when a session
ends, its processes on the far host get SIGHUP, so a rank whose launcher is gone does not stay behind.
``ServerAliveInterval``/``ClientAliveInterval`` (2 s, 2 probes) let each side notice a dead link
within about 4-6 s.

A launcher runs ON ``hostA`` (``ip netns exec``, :meth:`LocalHosts.exec_argv`), as on a cluster's
first node: ``horovodrun -H hostA:1,hostB:1`` starts the ``hostA`` rank directly and the ``hostB``
rank over ssh. The hosts are the same machine, so they share its file system (the course, its venv,
the data) and its cores: the ranks' slot files (``course_lib.training.machine.placement``) are machine-wide,
so ranks on the two "hosts" claim different cores, as they must.

Needs root and ``ip netns``; :meth:`LocalHosts.start` refuses with the remedy otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from course_lib.runner.procs.watchdog import end_tree
from tools.localcluster.common import LocalClusterError, require_programs, require_root, run, tail

__all__ = ["Host", "LocalHosts", "LINK", "NETNS_PREFIX", "HOST_NAMES", "why_not"]

#: The veth end's name inside each namespace (the same on both: Horovod intersects interface names).
LINK = "clc0"
#: Every namespace, veth and /etc/netns entry this module makes starts with this.
NETNS_PREFIX = "clc"
HOST_NAMES = ("hostA", "hostB")
SUBNET = "10.251.0"
SSHD_OPTIONS = ("-o", "Port=22", "-o", "PermitRootLogin=prohibit-password", "-o", "PasswordAuthentication=no",
                "-o", "KbdInteractiveAuthentication=no", "-o", "UsePAM=no", "-o", "StrictModes=no",
                "-o", "PrintMotd=no", "-o", "ClientAliveInterval=2", "-o", "ClientAliveCountMax=2",
                "-o", "LogLevel=VERBOSE", "-o", "MaxStartups=50")


@dataclass(frozen=True)
class Host:
    """One namespace "host": its name, namespace, address, and the folder of its sshd's files."""

    name: str
    namespace: str
    address: str
    tmp_link: str  # the veth end's name in the root namespace, before it moved


def why_not() -> str | None:
    """Why this machine cannot host the two ssh hosts (``None``: it can), without starting anything."""
    try:
        require_root("two ssh hosts in network namespaces")
        tools = require_programs("two ssh hosts in network namespaces", ["ip", "sshd", "ssh", "ssh-keygen"])
        probe = run([tools["ip"], "netns", "list"], check=False)
    except LocalClusterError as exc:
        return str(exc)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()}"
    return None


class LocalHosts:
    """Start/stop the two hosts (use as a context manager, or :meth:`start` / :meth:`stop`).

    Args:
        tag: Makes the namespace names unique (default: this process id), so two sets can coexist.
        workdir: Where keys, configs and logs go (default: a new temporary folder, removed by stop).
    """

    def __init__(self, tag: str | None = None, workdir: Path | None = None) -> None:
        tag = tag or str(os.getpid())
        if not tag.isalnum() or len(tag) > 8:
            raise LocalClusterError(f"tag={tag!r} must be 1-8 letters or digits (it goes in interface names)")
        self.tag = tag
        self.hosts = tuple(Host(name, f"{NETNS_PREFIX}{tag}{letter}", f"{SUBNET}.{i + 1}",
                                f"{NETNS_PREFIX}{tag}{letter}")
                           for i, (name, letter) in enumerate(zip(HOST_NAMES, "ab")))
        self.workdir = workdir
        self._own_workdir = workdir is None
        self.sshd_pids: dict[str, int] = {}
        self._made_run_sshd = False
        self.started = False

    # ------------------------------------------------------------------ life cycle
    def __enter__(self) -> "LocalHosts":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def host(self, name: str) -> Host:
        """The host called ``name`` (``LocalClusterError`` naming the known ones otherwise)."""
        for host in self.hosts:
            if host.name == name:
                return host
        raise LocalClusterError(f"no host named {name!r}; the local hosts are {', '.join(HOST_NAMES)}")

    def start(self) -> "LocalHosts":
        """Make the namespaces, the link, the keys and the sshds; wait until ssh works both ways."""
        require_root("two ssh hosts in network namespaces")
        self.tools = require_programs("two ssh hosts in network namespaces", ["ip", "sshd", "ssh", "ssh-keygen"])
        probe = run([self.tools["ip"], "netns", "list"], check=False)
        if probe.returncode != 0:
            raise LocalClusterError(f"`ip netns` does not work here ({probe.stderr.strip()}): network "
                                    "namespaces need root with CAP_SYS_ADMIN (a container started "
                                    "without it cannot make them)")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.started = True
        return self

    def _start(self) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="course-localhosts-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        ip = self.tools["ip"]
        a, b = self.hosts
        for host in self.hosts:
            run([ip, "netns", "add", host.namespace])
        run([ip, "link", "add", a.tmp_link, "type", "veth", "peer", "name", b.tmp_link])
        for host in self.hosts:
            run([ip, "link", "set", host.tmp_link, "netns", host.namespace])
            run([ip, "-n", host.namespace, "link", "set", host.tmp_link, "name", LINK])
            run([ip, "-n", host.namespace, "addr", "add", f"{host.address}/30", "dev", LINK])
            run([ip, "-n", host.namespace, "link", "set", LINK, "up"])
            run([ip, "-n", host.namespace, "link", "set", "lo", "up"])
            etc = Path("/etc/netns") / host.namespace
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(
                "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in self.hosts)
                # The machine's own name is this host's address, as on a real node (Gloo, given
                # --network-interface, still resolved it: 127.0.1.1 sent rank 0 to hostA's loopback).
                + f"{host.address} {socket.gethostname()}\n")
        self._write_keys_and_config()
        run_sshd = Path("/run/sshd")  # sshd's privilege-separation folder must exist
        if not run_sshd.exists():
            run_sshd.mkdir(mode=0o755, parents=True)
            self._made_run_sshd = True
        for host in self.hosts:
            self._start_sshd(host)
        for src, dst in ((a, b), (b, a)):
            self._wait_for_ssh(src, dst)
        self._save_state()

    def _write_keys_and_config(self) -> None:
        assert self.workdir is not None
        keygen, d = self.tools["ssh-keygen"], self.workdir
        run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "course-localcluster-user", "-f", str(d / "id_user")])
        known = []
        for host in self.hosts:
            key = d / f"host_key_{host.name}"
            run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", f"course-localcluster-{host.name}", "-f", str(key)])
            public = (d / f"host_key_{host.name}.pub").read_text().split()[:2]
            known.append(f"{host.name},{host.address} {' '.join(public)}\n")
        (d / "known_hosts").write_text("".join(known))
        (d / "authorized_keys").write_text((d / "id_user.pub").read_text())
        os.chmod(d / "authorized_keys", 0o600)
        config = "".join(f"Host {h.name}\n    HostName {h.address}\n" for h in self.hosts)
        config += (f"Host *\n    User root\n    Port 22\n    IdentityFile {d / 'id_user'}\n"
                   f"    IdentitiesOnly yes\n    UserKnownHostsFile {d / 'known_hosts'}\n"
                   "    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    BatchMode yes\n"
                   "    ConnectTimeout 3\n    ServerAliveInterval 2\n    ServerAliveCountMax 2\n"
                   "    RequestTTY force\n    LogLevel ERROR\n")
        (d / "ssh_config").write_text(config)
        bindir = d / "bin"
        bindir.mkdir(exist_ok=True)
        wrapper = bindir / "ssh"
        wrapper.write_text(f"#!/bin/sh\n# ssh with the local cluster's config (tools/localcluster/hosts.py)\n"
                           f"exec {self.tools['ssh']} -F {d / 'ssh_config'} \"$@\"\n")
        wrapper.chmod(0o755)

    def _start_sshd(self, host: Host) -> None:
        assert self.workdir is not None
        d = self.workdir
        log = open(d / f"sshd_{host.name}.log", "wb")
        argv = [self.tools["ip"], "netns", "exec", host.namespace, self.tools["sshd"], "-D", "-e", "-f", "/dev/null",
                "-o", f"ListenAddress={host.address}", "-o", f"HostKey={d / f'host_key_{host.name}'}",
                "-o", f"AuthorizedKeysFile={d / 'authorized_keys'}",
                "-o", f"PidFile={d / f'sshd_{host.name}.pid'}", *SSHD_OPTIONS]
        with log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.sshd_pids[host.name] = proc.pid  # `ip netns exec` execs sshd: the same pid

    def _wait_for_ssh(self, src: Host, dst: Host, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:  # bounded: about 15 s
            done = run(self.exec_argv(src.name, ["ssh", "-T", dst.name, "true"]), check=False, timeout=10,
                       env=self.launcher_env())
            if done.returncode == 0:
                return
            last = (done.stderr or done.stdout).strip()
            time.sleep(0.3)
        raise LocalClusterError(f"ssh from {src.name} to {dst.name} did not work within {timeout:g} s: {last}; "
                                f"sshd log: {tail(self.workdir / f'sshd_{dst.name}.log')}")  # type: ignore[operator]

    def _save_state(self) -> None:
        assert self.workdir is not None
        state = {"tag": self.tag, "workdir": str(self.workdir), "sshd_pids": self.sshd_pids,
                 "made_run_sshd": self._made_run_sshd,
                 "hosts": [h.__dict__ for h in self.hosts]}
        (self.workdir / "state.json").write_text(json.dumps(state, indent=1))

    @classmethod
    def from_state(cls, workdir: Path) -> "LocalHosts":
        """The set started (by ``python -m tools.localcluster up``) with its files in ``workdir``."""
        state = json.loads((workdir / "state.json").read_text())
        hosts = cls(tag=state["tag"], workdir=workdir)
        hosts._own_workdir = True
        hosts.sshd_pids = {k: int(v) for k, v in state["sshd_pids"].items()}
        hosts._made_run_sshd = bool(state.get("made_run_sshd"))
        hosts.tools = require_programs("the local hosts", ["ip", "sshd", "ssh", "ssh-keygen"])
        hosts.started = True
        return hosts

    def stop(self) -> None:
        """End every process in the namespaces (sshd, sessions, ranks), delete namespaces, links,
        /etc/netns entries and the temporary folder. Safe to call twice, or after a failed start."""
        ip = getattr(self, "tools", {}).get("ip") or shutil.which("ip") or "/usr/sbin/ip"
        for pid in self.sshd_pids.values():
            _end(pid, self.workdir)
        for host in self.hosts:
            for pid in self.pids(host.name):
                _end(pid, None)
        for host in self.hosts:
            run([ip, "netns", "del", host.namespace], check=False)
            run([ip, "link", "del", host.tmp_link], check=False)  # only if it never moved
            shutil.rmtree(Path("/etc/netns") / host.namespace, ignore_errors=True)
        netns_etc = Path("/etc/netns")
        if netns_etc.is_dir() and not any(netns_etc.iterdir()):
            netns_etc.rmdir()
        if self._made_run_sshd:
            try:
                Path("/run/sshd").rmdir()
            except OSError:
                pass
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.sshd_pids = {}
        self.started = False

    # ------------------------------------------------------------------ using the hosts
    def exec_argv(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run ON ``host`` (in its namespace, with its /etc/hosts)."""
        return [getattr(self, "tools", {}).get("ip", "ip"), "netns", "exec", self.host(host).namespace, *argv]

    def launcher_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a launcher on a host: the ssh wrapper first on ``PATH``."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.workdir}/bin{os.pathsep}{env.get('PATH', '')}"
        return env

    def host_list(self, slots: int = 1) -> str:
        """``"hostA:1,hostB:1"`` (horovodrun's ``-H``)."""
        return ",".join(f"{h.name}:{slots}" for h in self.hosts)

    def pids(self, host: str) -> list[int]:
        """Every process in ``host``'s namespace (``ip netns pids``)."""
        ip = getattr(self, "tools", {}).get("ip") or "ip"
        done = run([ip, "netns", "pids", self.host(host).namespace], check=False)
        return [int(p) for p in done.stdout.split() if p.isdigit()] if done.returncode == 0 else []

    def processes(self, host: str, *, besides_sshd: bool = True) -> list[str]:
        """``"pid command"`` of each process in ``host``'s namespace (the listening sshd left out)."""
        out = []
        for pid in self.pids(host):
            if besides_sshd and pid in self.sshd_pids.values():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out.append(f"{pid} {cmd.strip()}")
        return out

    def routes(self, host: str) -> str:
        """``ip -n NS route show table all`` of ``host`` (IPv4 and IPv6)."""
        ns = self.host(host).namespace
        ip = self.tools["ip"]
        return (run([ip, "-n", ns, "-4", "route", "show", "table", "all"]).stdout
                + run([ip, "-n", ns, "-6", "route", "show", "table", "all"]).stdout)

    def links(self, host: str) -> list[str]:
        """The interface names in ``host``'s namespace."""
        done = run([self.tools["ip"], "-n", self.host(host).namespace, "-o", "link", "show"])
        return [line.split(":")[1].strip().split("@")[0] for line in done.stdout.splitlines() if ":" in line]

    def set_link(self, host: str, up: bool) -> None:
        """Take ``host``'s end of the pair down (the other end loses its carrier) or bring it back."""
        run([self.tools["ip"], "-n", self.host(host).namespace, "link", "set", LINK, "up" if up else "down"])


def _end(pid: int, workdir: Path | None, grace: float = 3.0) -> None:
    """SIGTERM then SIGKILL ``pid`` (only if it still runs and, with ``workdir``, names it: no reused pid)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if workdir is not None and str(workdir).encode() not in cmd:
        return
    end_tree([pid], grace_s=(0.0, grace), interrupt=False, kill_s=2.0)  # reaps it when it is our child
