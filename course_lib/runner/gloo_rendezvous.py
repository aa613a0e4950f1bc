"""A fix for Horovod 0.28.1's Gloo rendezvous server, so that a rank can restart Horovod in one launch.

``hvd.shutdown()`` then ``hvd.init()`` in the same launch (``allreduce_bench.py --cycle-times``, used by
notebooks/05_communication.ipynb) rendezvouses again through the HTTP server that ``horovodrun --gloo``
started. Each ``hvd.init`` meets in three scopes of that server, one after another: ``global`` (every
rank), ``local_<host>`` (the ranks of a host) and ``cross_<local rank>``. A rank that has connected in a
scope says so (HTTP ``DELETE``); when every rank of the scope has, the server forgets the scope's
addresses, so that the next ``init`` cannot read them.

Horovod's ``RendezvousHandler.do_DELETE`` then empties the list of finished ranks of **every** scope
(``finished_list.clear()``), not just of the scope that completed. With two ranks on one host: rank 0
finishes ``local_<host>``, then ``cross_0`` (a scope of one rank, complete at once: every list is
emptied, rank 0's ``local`` entry with it); rank 1 finishes ``local_<host>`` after that and is counted
alone, so the scope never completes and its addresses stay. At the next ``hvd.init`` rank 0 may read
rank 1's address of the last ``init`` before rank 1 writes its new one, and Gloo aborts the rank:
``gloo::IoException ... connect [127.0.0.1]:PORT: Connection refused`` (seen in CI and a fresh clone).

:func:`fix_scope_clearing` replaces ``do_DELETE`` by one that empties the completed scope's list only.
Scopes that a client adds itself keep Horovod's behaviour. :func:`course_lib.runner.horovodrun.main`
applies it before it starts a launch; plain ``horovodrun`` keeps the bug.

Introduced in notebooks/05_communication.ipynb (the benchmark's restarts between cycle times).
"""

from __future__ import annotations

from typing import Any

__all__ = ["fix_scope_clearing"]


def fix_scope_clearing(handler_cls: Any) -> None:
    """Make ``handler_cls.do_DELETE`` forget only the scope that completed (idempotent).

    Args:
        handler_cls: ``horovod.runner.http.http_server.RendezvousHandler`` (or a stand-in with the same
            ``do_DELETE``, ``path``, ``server`` and ``send_status_code``).
    """
    original = handler_cls.do_DELETE
    if getattr(original, "course_fixed", False):
        return

    def do_DELETE(self: Any) -> None:  # noqa: N802 (the name http.server calls)
        paths = self.path.split("/")
        server = self.server
        if len(paths) != 3 or paths[1] not in server.scope_size:
            return original(self)  # a bad path, or a scope a client added: Horovod's own handling
        _, scope, key = paths
        with server.finished_list_lock:
            finished = server.finished_list[scope]
            if key not in finished:
                finished.append(key)
            if len(finished) >= server.scope_size[scope]:
                with server.cache_lock:
                    server.cache.get(scope, {}).clear()
                del server.finished_list[scope]  # this scope's list only (Horovod: every scope's)
        self.send_status_code(200)

    do_DELETE.course_fixed = True  # type: ignore[attr-defined]
    do_DELETE.__doc__ = "Horovod's do_DELETE, forgetting only the completed scope (course_lib.runner.gloo_rendezvous)"
    handler_cls.do_DELETE = do_DELETE
