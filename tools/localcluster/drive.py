"""Run the course's launcher ON a local host, and read what it did: ``python -m tools.localcluster.drive SPEC``.

The launcher of a two-host run must run on one of the hosts (the hosts' addresses exist only between
the two namespaces), as on a cluster's first node. :func:`launch_on` starts this module in ``hostA``'s
namespace (``ip netns exec``) with the ssh wrapper first on ``PATH``; the module calls
``course_lib.runner.run_horovod`` (Gloo or MPI) or ``run_elastic`` with the host list, prints every line
of the run as it comes, then one ``LOCALCLUSTER_RESULT {json}`` line: status, digests, epochs, the
result event, every event, and the error (its type and message) if the run failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from course_lib.runner.procs.watchdog import end_tree
from tools.localcluster.common import LocalClusterError, run
from tools.localcluster.hosts import LINK, LocalHosts

__all__ = ["launch_on", "gloo_on_two_hosts", "RESULT_MARK", "DISCOVERY", "ROOT"]

RESULT_MARK = "LOCALCLUSTER_RESULT "
ROOT = Path(__file__).resolve().parents[2]
DISCOVERY = Path(__file__).resolve().parent / "discover_reachable.sh"


def _main(spec: dict[str, Any]) -> int:
    from course_lib.runner import launch, multiworker
    from course_lib.runner.run import RunFailedError

    options = {"timeout": spec.get("timeout", 120), "show": "all", "output": lambda line: print(line, flush=True),
               "check": True, "env": spec.get("env") or {}}
    if spec.get("python"):
        options["python"] = spec["python"]
    out: dict[str, Any] = {"error": None}
    result = None
    start = time.monotonic()
    try:
        if spec["kind"] == "elastic":
            result = multiworker.run_elastic(
                spec["script"], spec["args"], workers=spec.get("workers", 2), elastic=multiworker.Elastic(
                    min_workers=spec.get("min_workers", 1), max_workers=spec.get("max_workers", 2), hosts=spec["hosts"],
                    discovery_script=str(DISCOVERY), network_interface=LINK,
                    cooldown_range=tuple(spec.get("cooldown_range", (1, 2))),
                    elastic_timeout=spec.get("elastic_timeout", 30)), **options)
        else:
            result = launch.run_horovod(
                spec["script"], spec["args"], workers=spec.get("workers", 2), horovodrun=launch.Horovodrun(
                    hosts=spec["hosts"], controller=spec["kind"], extra_args=["--network-interface", LINK]), **options)
    except RunFailedError as exc:
        out["error"] = {"type": type(exc).__name__, "message": str(exc)}
        result = getattr(exc, "result", None)
    except Exception as exc:  # reported to the caller, who decides
        out["error"] = {"type": type(exc).__name__, "message": str(exc)}
    out["seconds"] = time.monotonic() - start
    if result is not None:
        out.update(command=result.command, returncode=result.returncode, digests=result.digests, epochs=result.epochs,
                   result=result.result, events=result.events, pids=result.pids)
    print(RESULT_MARK + json.dumps(out), flush=True)
    return 0


def launch_on(hosts: LocalHosts, spec: dict[str, Any], *, on_line: Callable[[str], None] | None = None,
              timeout: float = 150, on: str = "hostA") -> dict[str, Any]:
    """Run the course's launcher on host ``on`` with ``spec`` (see :func:`_main`); its summary.

    Each output line goes to ``on_line`` as it comes (from a reader thread). The whole call is
    bounded by ``timeout`` seconds: past it, the launcher's process group is killed and
    :class:`LocalClusterError` raised.

    Returns:
        The ``LOCALCLUSTER_RESULT`` dict, with ``lines`` (every line) added.
    """
    argv = hosts.exec_argv(on, [sys.executable, "-m", "tools.localcluster.drive", json.dumps(spec)])
    env = hosts.launcher_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            lines.append(line)
            if on_line is not None:
                on_line(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The course's one way to end a tree: SIGINT first, so the launcher ends its ranks on both hosts (those on
        # hostB are sshd's children, outside this process group), then SIGTERM and SIGKILL to the group.
        end_tree([proc], group=proc.pid, reap=proc.poll)
        proc.wait(timeout=10)
        reader.join(timeout=5)
        raise LocalClusterError(f"the launcher on {on} did not end within {timeout:g} s; last lines: "
                                + " | ".join(lines[-15:])) from None
    reader.join(timeout=10)
    for line in reversed(lines):
        if line.startswith(RESULT_MARK):
            summary = json.loads(line[len(RESULT_MARK):])
            summary["lines"] = lines
            return summary
    raise LocalClusterError(f"the launcher on {on} ended (status {proc.returncode}) without a result; "
                            "last lines: " + " | ".join(lines[-20:]))


def gloo_on_two_hosts(script: str | os.PathLike[str], args: list[str], *, env: dict[str, str] | None = None,
                      on_line: Callable[[str], None] | None = None, timeout: float = 300) -> dict[str, Any]:
    """Start the two hosts, run ``horovodrun --gloo -H hostA:1,hostB:1 python script args`` from hostA, stop them.

    Notebook 06's real two-host run: what :func:`launch_on` returns, plus ``routes`` (hostB's whole routing
    table) and ``over_ssh`` (whether hostB's sshd accepted a login during the run).
    """
    with LocalHosts() as pair:
        routes = run([pair.tools["ip"], "-n", pair.host("hostB").namespace, "route"]).stdout.strip()  # the main table
        log = pair.workdir / "sshd_hostB.log"
        logins = log.read_text().count("Accepted publickey")
        summary = launch_on(pair, {"kind": "gloo", "script": str(script), "args": list(args), "hosts": pair.host_list(),
                                   "timeout": max(timeout - 60, 60), "env": dict(env or {})},
                            on_line=on_line, timeout=timeout)
        summary["routes"] = routes
        summary["over_ssh"] = log.read_text().count("Accepted publickey") > logins
    return summary


if __name__ == "__main__":
    sys.exit(_main(json.loads(sys.argv[1])))
