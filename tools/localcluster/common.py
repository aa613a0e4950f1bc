"""What the local cluster's pieces share: the error type, the prerequisite checks, bounded commands.

Everything here is the standard library: the local cluster is set-up machinery, not course code,
and must work before (and without) TensorFlow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

__all__ = ["LocalClusterError", "require_root", "require_programs", "run", "wait_until", "REMEDY"]

#: What to do when the machine cannot host the local cluster (printed by every refusal).
REMEDY = ("run as root on Debian/Ubuntu after `make setup` (it installs slurm-wlm, munge, "
          "openssh-server and iproute2 with the other system packages), or `sudo apt-get install -y "
          "slurm-wlm munge openssh-server iproute2`")


class LocalClusterError(RuntimeError):
    """The local cluster cannot start, or a request to it failed; the message says why and what to do."""


def require_root(what: str) -> None:
    """Raise unless this process is root (network namespaces, munge and slurmd need it)."""
    if os.geteuid() != 0:
        raise LocalClusterError(f"{what} needs root (uid 0; this is uid {os.geteuid()}): {REMEDY}")


def require_programs(what: str, names: Sequence[str]) -> dict[str, str]:
    """The absolute path of each program in ``names`` (``PATH`` plus ``/usr/sbin``, ``/sbin``).

    Raises:
        LocalClusterError: Naming every missing program and the remedy.
    """
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin"])
    found = {name: shutil.which(name, path=search) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise LocalClusterError(f"{what} needs {', '.join(missing)} (not found): {REMEDY}")
    return {name: str(path) for name, path in found.items()}


def run(argv: Sequence[str], *, timeout: float = 20, check: bool = True,
        env: dict[str, str] | None = None, input_text: str | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` (a list: never a shell) with a time limit; ``check``: raise with its stderr."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env,
                              input=input_text)
    except subprocess.TimeoutExpired as exc:
        raise LocalClusterError(f"{' '.join(argv)} did not finish within {timeout:g} s") from exc
    except FileNotFoundError as exc:
        raise LocalClusterError(f"cannot run {argv[0]!r}: {exc}; {REMEDY}") from exc
    if check and done.returncode != 0:
        raise LocalClusterError(f"{' '.join(argv)} failed (status {done.returncode}): "
                                f"{(done.stderr or done.stdout).strip()[-800:]}")
    return done


def wait_until(predicate: Callable[[], object], *, timeout: float, interval: float = 0.2,
               what: str = "the condition") -> object:
    """Poll ``predicate`` until it returns something true; a bounded loop (``timeout`` seconds).

    Raises:
        LocalClusterError: ``what`` did not happen in time.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise LocalClusterError(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)


def tail(path: Path, chars: int = 1500) -> str:
    """The end of a log file ("" when it does not exist)."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""
