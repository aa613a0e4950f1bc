"""Faults between the local hosts: take one host's link down, and bring it back.

``ip link set clc0 down`` in one namespace removes that host's route to the other and leaves the other
end without carrier: packets between the two hosts are dropped, as when a cable is pulled or a switch
port dies. Nothing is killed; what notices is the software: ssh's ``ServerAliveInterval`` (2 s x 2
probes) on the launcher's side, sshd's ``ClientAliveInterval`` (the same) on the far side, which ends the
session and so SIGHUPs the ranks it started (the sessions have a pseudo-terminal), and Gloo's own
time-outs in the ranks.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from tools.localcluster.common import run, wait_until
from tools.localcluster.hosts import LocalHosts

__all__ = ["link_down", "link_up", "link_cut"]


def link_down(hosts: LocalHosts, host: str) -> float:
    """Take ``host``'s end of the pair down; the ``time.monotonic()`` at which it went down."""
    hosts.set_link(host, up=False)
    return time.monotonic()


def link_up(hosts: LocalHosts, host: str, *, wait_s: float = 0.0) -> float:
    """Bring ``host``'s link back (its address and route return with it); when it came back.

    Args:
        wait_s: Up to this many seconds, wait until ``host``'s sshd answers from the other host again
            (0: return at once; the caller measures what follows from the returned time).

    Raises:
        LocalClusterError: ``wait_s`` passed and the host still does not answer.
    """
    hosts.set_link(host, up=True)
    back = time.monotonic()
    if wait_s > 0:
        other = next(h.name for h in hosts.hosts if h.name != host)
        address = hosts.host(host).address
        probe = hosts.exec_argv(other, ["timeout", "1", "bash", "-c", f'exec 3<>"/dev/tcp/{address}/22"'])
        wait_until(lambda: run(probe, check=False, timeout=5).returncode == 0, timeout=wait_s,
                   interval=0.2, what=f"{host}'s sshd answering after its link came back")
    return back


@contextmanager
def link_cut(hosts: LocalHosts, host: str) -> Iterator[float]:
    """``with link_cut(hosts, "hostB") as t0:`` the link is down inside the block, up after it."""
    t0 = link_down(hosts, host)
    try:
        yield t0
    finally:
        link_up(hosts, host, wait_s=10)
