"""Process scans shared by the tests that must leave no process behind."""

from __future__ import annotations

import psutil


def processes_with(mark: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``mark``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                    mark in arg for arg in proc.info["cmdline"] or ()):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found
