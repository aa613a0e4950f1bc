"""Two ssh hosts with their own network stacks (tools/localcluster/hosts.py), and a host that drops off.

``hostA`` and ``hostB`` are network namespaces joined by one veth pair; each runs an sshd. The course's
launcher runs ON hostA (as on a cluster's first node) and starts ``horovodrun -H hostA:1,hostB:1``
(MPI with mpirun here; the same Gloo run is notebooks/06_beyond_one_machine.ipynb's, compared by nbval):
the hostB rank arrives through a real ssh login. Both train to the same digest. Horovod Elastic runs on
the same pair with a discovery script that names the hosts whose sshd answers
(tools/localcluster/discover_reachable.sh).

Faults: hostB's link goes down mid-run. A fixed-size job must end, within :data:`FIXED_DETECT_S`, with an
error naming hostB, and leave no process on either host; an elastic job must carry on with hostA, reach
its last epoch, and re-admit hostB once its link is back. The detection times are printed (``-s``).

The two hosts are one machine: they share its file system and its cores. The ranks' slot files
(course_lib.training.machine.placement) are machine-wide, so the two ranks claim different cores; each rank is
told its share (``--threads-per-worker 1``), since each "host" would otherwise believe it has the whole
machine to itself (local size 1) and the first rank would claim every core.

Needs root and ``ip netns`` (and openssh-server, which `make setup` installs as root); without them these
tests FAIL with the remedy (no skip).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_lib.runner.runlog import parse_line  # noqa: E402
from tools.localcluster import faults  # noqa: E402
from tools.localcluster.common import LocalClusterError, run  # noqa: E402
from tools.localcluster.drive import DISCOVERY, launch_on  # noqa: E402
from tools.localcluster.hosts import LINK, NETNS_PREFIX, LocalHosts  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.horovod]

FIXED = ROOT / "source_code" / "horovod_fmnist.py"
ELASTIC = ROOT / "source_code" / "horovod_fmnist_elastic.py"
#: A digest identity needs a step or two, not an epoch of 1024 images: 256 images are 2 steps of 64 on each of the
#: 2 ranks (issue 31: was 1024 images, 8 steps, as tests/test_local_slurm.py's sbatch jobs before it).
SMALL = ["--train-subset", "256", "--test-subset", "128", "--batch-size", "64", "--threads-per-worker", "1",
         "--json"]
#: The fixed-size job whose link goes down: the fault lands at its first epoch event and the rest of the run
#: only has to outlast it. 9 epochs of 256 images leave the same 16 steps after the first epoch as the former
#: 3 epochs of 1024, while the first epoch (before the fault, all the run's work) is 2 steps instead of 8.
LINK_DOWN_EPOCHS = 9
#: A fixed-size job must fail within this many seconds of the link going down (ssh's ServerAliveInterval
#: 2 s x ServerAliveCountMax 2, plus the launcher's clean-up). Measured: see the commit message.
FIXED_DETECT_S = 20
#: And nothing may be left on hostB this long after the failure (sshd's ClientAliveInterval 2 s x 2
#: ends the session; the pseudo-terminal's SIGHUP ends the rank).
REMOTE_GONE_S = 15
#: Elastic: Gloo's time-out for a rank waiting on the lost host (see the test), and the run's size. It also
#: bounds the survivors' wait at the rendezvous for the re-admitted host's fresh worker, which imports
#: TensorFlow first: 8 s aborted the job (gloo::IoException "Wait timeout after 8 seconds", exit 134) 3 times
#: in 3 at load 11-21 (2026-11-26); 20 s leaves a busy machine room for that start.
GLOO_TIMEOUT_S = 20
ELASTIC_EPOCHS = 5
ELASTIC_DATA = ["--train-subset", "1024", "--test-subset", "256"]
#: The elastic job must also learn through the fault (this test is the suite's one elastic run that checks it;
#: notebooks/06_beyond_one_machine.ipynb checks the killed-worker run's shrink, regrowth and last epoch).
#: Measured for the former tests/test_elastic.py (2026-11-21), 2 workers, 6 epochs of 1024 images, not interrupted,
#: seeds 1, 42, 7: test accuracy 0.785, 0.793, 0.758; 4 epochs with a killed worker: 0.789. Chance: 0.10.
ELASTIC_MIN_ACCURACY = 0.4


def namespace_leftovers(before_passwd: str, tag: str, workdir: Path) -> list[str]:
    """Namespaces, links, /etc/netns entries, processes (sshd, sessions, ranks) or key folder of the local
    hosts ``tag`` (files in ``workdir``) still present, and any change to the users."""
    prefix = NETNS_PREFIX + tag
    found = [f"namespace {n}" for n in run(["ip", "netns", "list"]).stdout.split() if n.startswith(prefix)]
    found += [f"link {line.split(':')[1].strip()}" for line in run(["ip", "-o", "link"]).stdout.splitlines()
              if line.split(":")[1].strip().startswith(prefix)]
    netns_etc = Path("/etc/netns")
    if netns_etc.exists():
        found += [f"/etc/netns/{p.name}" for p in netns_etc.iterdir() if p.name.startswith(prefix)]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(workdir) in cmd:
            found.append(f"process {proc.name} {cmd[:120]}")
    if workdir.exists():
        found.append(f"folder {workdir} (keys, known_hosts, ssh config)")
    if Path("/etc/passwd").read_text() != before_passwd:
        found.append("/etc/passwd changed (a user was added or removed)")
    return found


@pytest.fixture(scope="module")
def hosts():
    passwd = Path("/etc/passwd").read_text()
    pair = LocalHosts()
    try:
        pair.start()
    except LocalClusterError as exc:
        pytest.fail(f"cannot start the two local ssh hosts: {exc}", pytrace=False)
    yield pair
    pair.stop()
    assert pair.workdir is not None and namespace_leftovers(passwd, pair.tag, pair.workdir) == []


def test_the_hosts_leave_no_daemon_namespace_link_user_or_key_behind():
    passwd = Path("/etc/passwd").read_text()
    pair = LocalHosts(tag="t0")
    pair.start()
    try:
        workdir = pair.workdir
        assert workdir is not None and (workdir / "id_user").exists() and (workdir / "known_hosts").exists()
        assert len(namespace_leftovers(passwd, "t0", workdir)) >= 7  # namespaces, /etc/netns, sshds, folder
        assert all(Path(f"/proc/{pid}").exists() for pid in pair.sshd_pids.values())
    finally:
        pair.stop()
    assert namespace_leftovers(passwd, "t0", workdir) == []


def _rank_cores(pair: LocalHosts, script: str) -> dict[str, set[int]]:
    """The CPU affinity of the rank running ``script`` on each host, read from /proc."""
    out = {}
    for host in ("hostA", "hostB"):
        for line in pair.processes(host):
            pid, _, cmd = line.partition(" ")
            if script in cmd and "python" in cmd.split()[0] and "horovodrun" not in cmd:
                try:
                    out[host] = set(os.sched_getaffinity(int(pid)))
                except OSError:
                    pass
    return out


def test_each_host_routes_only_to_the_other(hosts):
    """Containment, read from each namespace's tables (never by connecting out)."""
    for host in hosts.hosts:
        routes = hosts.routes(host.name)
        assert "default" not in routes, routes
        main = [line.strip() for line in run(["ip", "-n", host.namespace, "-4", "route", "show"]).stdout.splitlines()]
        assert main == [f"10.251.0.0/30 dev {LINK} proto kernel scope link src {host.address}"], main
        for line in routes.splitlines():  # every other route is local, broadcast, link-local or multicast
            assert re.match(rf"(local|broadcast|multicast|fe80::/64|10\.251\.0\.0/30) .*dev ({LINK}|lo)\b", line), line
        assert sorted(hosts.links(host.name)) == [LINK, "lo"]
        forwarding = run(hosts.exec_argv(host.name, ["cat", "/proc/sys/net/ipv4/ip_forward"])).stdout.strip()
        assert forwarding == "0"
        etc_hosts = run(hosts.exec_argv(host.name, ["cat", "/etc/hosts"])).stdout
        assert "10.251.0.1 hostA" in etc_hosts and "10.251.0.2 hostB" in etc_hosts


def test_wrong_host_name_is_a_clear_error(hosts):
    with pytest.raises(LocalClusterError, match=r"no host named 'hostC'; the local hosts are hostA, hostB"):
        hosts.exec_argv("hostC", ["true"])
    summary = launch_on(hosts, {"kind": "gloo", "script": str(FIXED), "args": ["--epochs", "1", *SMALL],
                                "hosts": "hostA:1,hostC:1", "timeout": 60}, timeout=90)
    assert summary["error"] is not None
    text = summary["error"]["message"] + "\n".join(summary["lines"])
    assert "hostC" in text and ("Could not resolve hostname" in text or "not resolve" in text), text[-2000:]


def _logins(pair: LocalHosts) -> int:
    """The ssh logins hostB's sshd has accepted so far."""
    return (pair.workdir / "sshd_hostB.log").read_text().count("Accepted publickey")  # type: ignore[operator]


def _assert_own_cores(cores: dict[str, set[int]]) -> None:
    """Each host had its rank, and the two shared no core (the machine-wide slot files)."""
    assert set(cores) == {"hostA", "hostB"}, cores
    # A rank pinned to some cores claimed them; a rank on every core found them all held (by the other
    # rank, or by other runs on this shared machine) and runs unpinned, as it says in its config event.
    everything = set(os.sched_getaffinity(0))
    pinned = [share for share in cores.values() if share != everything]
    assert len(pinned) < 2 or not (pinned[0] & pinned[1]), cores


# Gloo (issue 31: its run here was cut): notebooks/06_beyond_one_machine.ipynb launches the same Gloo run on
# these hosts (drive.launch_on, hostA:1,hostB:1) and nbval compares its "finished without error", "started
# through an ssh login" and "identical weights on both hosts" lines; the Gloo rank tag, the ssh login and
# the two ranks' own cores are checked on test_link_down_ends_a_fixed_size_job_naming_the_lost_host's run.
@pytest.mark.parametrize("controller", ["mpi"])
def test_two_hosts_train_to_the_same_digest(hosts, controller):
    logins_before = _logins(hosts)
    cores: dict[str, set[int]] = {}

    def on_line(line: str) -> None:
        if '"event": "epoch"' in line and not cores:
            cores.update(_rank_cores(hosts, FIXED.name))

    summary = launch_on(hosts, {"kind": controller, "script": str(FIXED), "args": ["--epochs", "1", *SMALL],
                                "hosts": hosts.host_list(), "timeout": 120}, on_line=on_line, timeout=150)
    assert summary["error"] is None and summary["returncode"] == 0, summary["lines"][-40:]
    assert sorted(summary["digests"]) == ["0", "1"] and len(set(summary["digests"].values())) == 1
    assert summary["result"]["workers"] == 2 and summary["result"]["epochs_run"] == 1
    # The controller asked for ran (horovodrun --mpi tags a line "[1,1]<stdout>:", Gloo "[1]<stdout>:").
    assert ("--mpi" in summary["command"]) == (controller == "mpi"), summary["command"]
    tag = "[1,1]<stdout>:" if controller == "mpi" else "[1]<stdout>:"
    assert any(tag in line for line in summary["lines"]), summary["lines"][-40:]
    assert _logins(hosts) > logins_before  # hostB's rank came over ssh
    _assert_own_cores(cores)
    assert hosts.processes("hostA") == [] and hosts.processes("hostB") == []


def test_link_down_ends_a_fixed_size_job_naming_the_lost_host(hosts):
    """Also the suite's Gloo two-host checks before the fault (see test_two_hosts_train_to_the_same_digest):
    hostB's rank came over ssh, Gloo tagged rank 1's lines, and each host's rank had its own cores."""
    logins_before = _logins(hosts)
    state: dict[str, float] = {}
    cores: dict[str, set[int]] = {}

    def on_line(line: str) -> None:
        if _event(line).get("event") == "epoch" and "down" not in state:
            cores.update(_rank_cores(hosts, FIXED.name))  # read while both ranks run, before the fault
            state["down"] = faults.link_down(hosts, "hostB")

    try:
        summary = launch_on(hosts, {"kind": "gloo", "script": str(FIXED),
                                    "args": ["--epochs", str(LINK_DOWN_EPOCHS), *SMALL],
                                    "hosts": hosts.host_list(), "timeout": 120}, on_line=on_line, timeout=150)
        ended = time.monotonic()
        assert "down" in state, summary["lines"][-30:]
        assert "--mpi" not in summary["command"] and "--gloo" in summary["command"], summary["command"]
        assert any("[1]<stdout>:" in line for line in summary["lines"]), summary["lines"][-40:]  # Gloo's rank tag
        assert _logins(hosts) > logins_before  # hostB's rank came over ssh
        _assert_own_cores(cores)
        detect = ended - state["down"]
        print(f"fixed-size job ended {detect:.1f} s after hostB's link went down")
        assert summary["error"] is not None, summary["lines"][-30:]
        message = summary["error"]["message"]
        assert "rank 1 (on hostB) failed" in message and "hostB went down or became unreachable" in message, message
        assert detect < FIXED_DETECT_S
        assert hosts.processes("hostA") == []
        deadline = time.monotonic() + REMOTE_GONE_S
        while hosts.processes("hostB") and time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"hostB empty {time.monotonic() - state['down']:.1f} s after the link went down")
        assert hosts.processes("hostB") == []
    finally:
        faults.link_up(hosts, "hostB", wait_s=10)


def _event(line: str) -> dict:
    """The JSON event in one output line of the launcher (``{}`` if none): the course's own parser, which
    also reads a pty rank's ``[0]<stdout>:{...}\r[0]<stdout>:``."""
    return parse_line(line)[3] or {}


def test_elastic_carries_on_without_the_host_and_readmits_it(hosts, tmp_path):
    """Elastic on both hosts (the discovery script names the hosts whose sshd answers); hostB's link goes
    down after the first epoch and comes back as soon as the group has shrunk to hostA alone. The job waits for
    hostB at its first commit after the shrink (``--regrow-wait-s``): without it, a fast machine ended the last
    epochs before hostB's cool-down and its new worker's start-up, and hostB was never taken back in."""
    env = {"DISCOVER_HOSTS": "hostA:1 hostB:1"}
    listed = run(hosts.exec_argv("hostA", [str(DISCOVERY)]), env=hosts.launcher_env() | env).stdout.split()
    assert listed == ["hostA:1", "hostB:1"]
    state: dict[str, float] = {}
    sizes: list[tuple[float, int]] = []  # (when, group size) from rank 0's epoch / reset events
    lock = threading.Lock()

    def on_line(line: str) -> None:
        event = _event(line)  # epoch and reset events come from rank 0 only (whichever host it is on now)
        if event.get("event") not in ("epoch", "reset"):
            return
        with lock:
            now = time.monotonic()
            sizes.append((now, int(event.get("workers", event.get("size", 0)))))
            if event["event"] == "epoch" and "down" not in state:
                state["down"] = faults.link_down(hosts, "hostB")
                listed_now = run(hosts.exec_argv("hostA", [str(DISCOVERY)]), env=hosts.launcher_env() | env)
                state["listed_while_down"] = listed_now.stdout.split()  # type: ignore[assignment]
            elif "down" in state and "up" not in state and sizes[-1][1] == 1:
                state["shrunk"] = now
                state["up"] = faults.link_up(hosts, "hostB")

    try:
        # A rank blocked in an all-reduce with the lost host waits for Gloo's time-out (30 s by default);
        # in an elastic job that time-out is a recoverable error, so a short one only costs a reset.
        summary = launch_on(hosts, {"kind": "elastic", "script": str(ELASTIC),
                                    "args": ["--epochs", str(ELASTIC_EPOCHS), "--regrow-wait-s", "60", *ELASTIC_DATA,
                                             "--batch-size", "64"],
                                    "hosts": hosts.host_list(), "cooldown_range": [1, 2], "timeout": 150,
                                    "env": {"HOROVOD_GLOO_TIMEOUT_SECONDS": str(GLOO_TIMEOUT_S)}},
                            on_line=on_line, timeout=170)
    finally:
        faults.link_up(hosts, "hostB", wait_s=10)
    log = tmp_path / "elastic.log"  # the whole log, for a failure's post-mortem
    log.write_text("\n".join(summary["lines"]))
    assert summary["error"] is None and summary["returncode"] == 0, (str(log), summary["lines"][-40:])
    assert sizes and sizes[0][1] == 2, sizes  # it started on both hosts
    assert state.get("listed_while_down") == ["hostA:1"], state
    # Rank 0 is whichever worker Horovod numbers 0 after each reset (here it can move from hostB to hostA),
    # while the launcher's line prefix is the worker's slot: read the events of every prefix.
    epochs = [e["epoch"] for _, e in summary["events"] if e["event"] == "epoch"]
    results = [e for _, e in summary["events"] if e["event"] == "result"]
    assert epochs[-1] == ELASTIC_EPOCHS and len(results) == 1, (epochs, results)  # the last epoch was reached
    assert results[0]["epochs_done"] == ELASTIC_EPOCHS, results
    assert 1 in [size for _, size in sizes], sizes  # it shrank to hostA alone (it started on both: above)
    losses = [e["loss"] for _, e in summary["events"] if e["event"] == "epoch"]
    assert losses[-1] < losses[0], losses  # the loss fell through the fault ...
    assert results[0]["test_accuracy"] >= ELASTIC_MIN_ACCURACY, results  # ... and it learned
    assert len(summary["digests"]) == 2 and len(set(summary["digests"].values())) == 1  # both hosts at the end
    assert "shrunk" in state, sizes
    grown = [t for t, size in sizes if t > state["up"] and size == 2]
    assert grown, sizes  # hostB came back
    print(f"elastic: shrank {state['shrunk'] - state['down']:.1f} s after the link went down; "
          f"re-admitted {grown[0] - state['up']:.1f} s after it came back; sizes {[n for _, n in sizes]}")
    assert hosts.processes("hostA") == []
