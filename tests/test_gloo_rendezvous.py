"""Tests of course_lib.runner.gloo_rendezvous: Horovod's Gloo rendezvous server forgets a completed scope.

The requests below are the ones two ranks on one host send at each ``hvd.init`` (Horovod's
``gloo_context.cc``: every rank writes its address to a scope, reads the others', and says it is done
with ``DELETE``), in the order that left ``local_localhost`` full of the last ``init``'s addresses in CI:
rank 0 completes the one-rank scope ``cross_0`` between its own and rank 1's ``DELETE`` of the local scope.
Horovod's real server answers them; no rank and no TensorFlow is started.
"""

from __future__ import annotations

import http.client

import pytest
from horovod.runner.common.util import hosts  # Horovod is part of the course's stack: no skip
from horovod.runner.http import http_server

from course_lib.runner import horovodrun
from course_lib.runner.gloo_rendezvous import fix_scope_clearing

LOCAL = "local_localhost"


def _request(port: int, method: str, scope: str, key: str, value: bytes | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, f"/{scope}/{key}", body=value)
        return conn.getresponse().status
    finally:
        conn.close()


def _one_init_in_the_racy_order(port: int, init: int) -> None:
    """Both ranks through the three scopes of one ``hvd.init``; rank 0 runs ahead in the local scope."""
    address = f"address of init {init}".encode()
    for scope in ("global", LOCAL):
        for rank in ("0", "1"):
            assert _request(port, "PUT", scope, rank, address) == 200
        if scope == "global":
            assert _request(port, "DELETE", scope, "0") == 200
            assert _request(port, "DELETE", scope, "1") == 200
    assert _request(port, "DELETE", LOCAL, "0") == 200
    assert _request(port, "PUT", "cross_0", "0", address) == 200
    assert _request(port, "DELETE", "cross_0", "0") == 200  # a scope of one rank: complete at once
    assert _request(port, "DELETE", LOCAL, "1") == 200
    assert _request(port, "PUT", "cross_1", "0", address) == 200
    assert _request(port, "DELETE", "cross_1", "0") == 200


@pytest.fixture()
def server(monkeypatch):
    """Horovod's rendezvous server for two ranks on localhost; ``do_DELETE`` restored afterwards."""
    monkeypatch.setattr(http_server.RendezvousHandler, "do_DELETE", http_server.RendezvousHandler.do_DELETE)
    rendezvous = http_server.RendezvousServer(verbose=0)
    port = rendezvous.start()
    rendezvous.init(hosts.get_host_assignments(hosts.parse_hosts("localhost:2"), 2))
    yield rendezvous, port
    rendezvous.stop()


def test_horovods_server_keeps_a_completed_scope_so_the_fix_is_still_needed(server):
    """If this fails, Horovod fixed its server: drop gloo_rendezvous (and this test)."""
    rendezvous, port = server
    _one_init_in_the_racy_order(port, 1)
    assert _request(port, "GET", LOCAL, "1") == 200, "Horovod's server now forgets the local scope"


def test_fixed_server_forgets_every_completed_scope_init_after_init(server):
    rendezvous, port = server
    fix_scope_clearing(http_server.RendezvousHandler)
    fix_scope_clearing(http_server.RendezvousHandler)  # idempotent: the second call changes nothing
    assert http_server.RendezvousHandler.do_DELETE.course_fixed
    for init in (1, 2, 3):
        _one_init_in_the_racy_order(port, init)
        for scope in ("global", LOCAL, "cross_0", "cross_1"):
            for rank in ("0", "1"):
                assert _request(port, "GET", scope, rank) == 404, f"init {init}: {scope}/{rank} was kept"
        assert not any(rendezvous._httpd.cache.values()), rendezvous._httpd.cache
        assert not rendezvous._httpd.finished_list, rendezvous._httpd.finished_list


def test_fixed_server_keeps_a_scope_until_its_last_rank_is_done_and_leaves_client_scopes_alone(server):
    rendezvous, port = server
    fix_scope_clearing(http_server.RendezvousHandler)
    assert _request(port, "PUT", LOCAL, "0", b"a") == 200
    assert _request(port, "PUT", LOCAL, "1", b"b") == 200
    assert _request(port, "DELETE", LOCAL, "0") == 200
    assert _request(port, "DELETE", LOCAL, "0") == 200  # a repeated DELETE does not count twice
    assert _request(port, "GET", LOCAL, "1") == 200
    assert _request(port, "PUT", "mine", "k", b"v") == 200  # an ad-hoc scope: Horovod deletes the key
    assert _request(port, "DELETE", "mine", "k") == 200
    assert _request(port, "GET", "mine", "k") == 404


def test_the_course_launcher_applies_it(monkeypatch):
    calls = []
    monkeypatch.setattr(horovodrun, "fix_scope_clearing", calls.append)
    from horovod.runner import launch

    monkeypatch.setattr(launch, "run_commandline", lambda: None)
    horovodrun.main(["-np", "1", "true"])
    assert calls == [http_server.RendezvousHandler]
