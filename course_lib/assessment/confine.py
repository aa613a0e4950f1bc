"""What a contained grading run takes from the system: a dedicated unprivileged user, a cgroup with its limits.

:class:`course_lib.assessment.sandbox.Sandbox` runs a submission as :func:`ensure_user`'s user (created as a system
user without a home or shell, never root) inside a cgroup (:class:`_Cgroup`: the v1 ``memory`` and ``pids``
controllers where mounted, else v2) that caps the :class:`Limits`; the room's grader removes the user with
:func:`remove_user`.

Introduced in assessment/source/ddp/assessment.ipynb (the room's grading, classroom/README.md).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Limits", "ensure_user", "remove_user"]


@dataclass(frozen=True)
class Limits:
    """What one contained command may use."""

    memory_mb: int = 6144
    processes: int = 256
    file_mb: int = 256
    tmp_mb: int = 256



def ensure_user(name: str) -> tuple[int, int]:
    """The dedicated grading user ``name`` (created as a system user without a home or shell if missing)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        raise ValueError(f"{name} is root: a grading user must be unprivileged")
    return entry.pw_uid, entry.pw_gid


def remove_user(name: str) -> None:
    """Remove the grading user ``name`` (nothing if there is none)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    subprocess.run(["userdel", name], check=False, capture_output=True)


class _Cgroup:
    """A cgroup for one contained command: v1 ``memory`` + ``pids`` controllers where mounted, else v2."""

    def __init__(self, name: str, limits: Limits, base: Path = Path("/sys/fs/cgroup")) -> None:
        self.dirs: list[Path] = []
        v1 = (base / "memory").is_dir() and (base / "pids").is_dir()
        if v1:
            memory, pids = base / "memory" / name, base / "pids" / name
            memory.mkdir()
            pids.mkdir()
            self.dirs = [memory, pids]
            (memory / "memory.limit_in_bytes").write_text(str(limits.memory_mb << 20))
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(limits.memory_mb << 20))
            (pids / "pids.max").write_text(str(limits.processes))
            self.memory_peak = memory / "memory.max_usage_in_bytes"
        else:
            group = base / name
            group.mkdir()
            self.dirs = [group]
            (group / "memory.max").write_text(str(limits.memory_mb << 20))
            (group / "pids.max").write_text(str(limits.processes))
            self.memory_peak = group / "memory.peak"

    def enter(self) -> None:
        """Put the calling process (the child before it execs) into every controller's group."""
        for folder in self.dirs:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        found: set[int] = set()
        for folder in self.dirs:
            try:
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(found)

    def peak_mb(self) -> float:
        try:
            return int(self.memory_peak.read_text()) / 2**20
        except (OSError, ValueError):
            return 0.0

    def remove(self) -> None:
        for folder in self.dirs:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
