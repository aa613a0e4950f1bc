"""Checks made before anything is launched: inputs, slots, horovodrun, mpirun, ports, worker ranges.

Every check raises :class:`LaunchError` with one message that says what is wrong and how to fix it. Used by
the engine (:mod:`course_lib.runner.run`), the launchers' descriptions (:mod:`course_lib.runner.launchers`: hosts,
ports, elastic worker ranges) and the slots. Facts about the machine are not decided here: what it can run is :func:`course_lib.training.machine.capacity.machine_capacity` (:func:`capacity`
checks a launch's ``device`` and ``$COURSE_SLOTS`` against it and turns its refusal into ``LaunchError``) and
how many GPUs it has is :func:`course_lib.training.machine.hardware.gpu_count`.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from course_lib.training.machine.capacity import Capacity, CapacityError, machine_capacity

__all__ = ["LaunchError", "capacity", "hosts_are_local", "parse_hosts", "find_horovodrun", "horovod_launcher",
           "check_hosts", "check_script", "check_strings", "check_env", "check_common", "check_mpirun", "check_int",
           "check_worker_range", "check_ports", "CONTROLLERS"]

CONTROLLERS = ("gloo", "mpi", None)
#: ``python -m`` this: horovodrun with its build check answered from a file (:mod:`course_lib.runner.horovodrun`).
LAUNCHER_MODULE = "course_lib.runner.horovodrun"
_SHOW = ("rank0", "all", "none")
_INSTALL_HINT = (
    "install it into this environment: run `make setup` (builds Horovod into .venv), or "
    "`HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 "
    "HOROVOD_WITH_GLOO=1 {python} -m pip install --no-cache-dir horovod==0.28.1`"
)


class LaunchError(ValueError):
    """Bad input or environment, detected before anything is launched."""


def capacity(device: str | None = None) -> Capacity:
    """Check ``device`` and ``$COURSE_SLOTS`` against this machine; answer its slots for ``device``.

    An input check, not a second owner: the slots are whatever
    :func:`course_lib.training.machine.capacity.machine_capacity` says (``"cpu"``, ``"gpu"``, ``None``: GPUs
    where there are any); only its refusal is turned into the launcher's one error type.

    Raises:
        LaunchError: A bad ``device`` or ``$COURSE_SLOTS`` (the message says how to fix it).
    """
    try:
        return machine_capacity(device)
    except CapacityError as exc:
        raise LaunchError(str(exc)) from None


_LOCAL_NAMES = ("localhost", "127.0.0.1")


def hosts_are_local(hosts: str | None) -> bool:
    """Whether every host of ``"host:slots,..."`` is this machine (``None``: this machine).

    ``localhost``, ``127.0.0.1`` and this machine's host name count; the launcher places and counts the
    workers of such runs against this machine's slots.
    """
    if hosts is None:
        return True
    names = {part.strip().partition(":")[0] for part in hosts.replace(" ", ",").split(",") if part.strip()}
    return names <= set(_LOCAL_NAMES) | {socket.gethostname()}


def parse_hosts(hosts: str | None, workers: int) -> tuple[tuple[str, int], ...]:
    """``"a:1,b:2"`` (or the discovery script's ``"a:1 b:2"``) -> ``(("a", 1), ("b", 2))``;
    ``None`` -> ``(("localhost", workers),)``, what horovodrun uses without ``-H``."""
    if hosts is None:
        return (("localhost", workers),)
    out = []
    for part in hosts.replace(" ", ",").split(","):
        name, _, slots = part.strip().partition(":")
        if name:
            out.append((name, int(slots) if slots.isdigit() else 1))
    return tuple(out)


def find_horovodrun(python: str = sys.executable) -> str:
    """The absolute path of ``horovodrun``: next to ``python`` (the ranks' interpreter: a notebook kernel's PATH
    often lacks its virtualenv's ``bin/``), next to ``sys.executable``, then on PATH.

    Raises:
        LaunchError: If it is found nowhere; the message says how to install Horovod.
    """
    for folder in (Path(python).parent, Path(sys.executable).parent):
        candidate = folder / "horovodrun"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("horovodrun")
    if found:
        return found
    raise LaunchError(
        f"horovodrun was not found next to {python} nor on PATH; "
        + _INSTALL_HINT.format(python=python)
    )


def horovod_launcher(python: str, horovodrun: str) -> list[str]:
    """How the course starts ``horovodrun`` for ranks that run ``python``: ``[python, -m, LAUNCHER_MODULE]``.

    That is Horovod's own launcher with its per-launch build check (a forked TensorFlow import, 5-10 s)
    answered from a kept file (:mod:`course_lib.runner.horovodrun`). ``horovodrun`` is the path that
    :func:`find_horovodrun` found, proof that Horovod's launcher is installed for ``python``.
    """
    if not horovodrun:
        raise LaunchError("horovodrun was not found; " + _INSTALL_HINT.format(python=python))
    return [python, "-m", LAUNCHER_MODULE]


def check_hosts(hosts: str) -> int:
    """Validate a horovodrun host list.

    Args:
        hosts: ``"host:slots[,host:slots...]"`` with every ``slots`` a positive int.

    Returns:
        The total number of slots.

    Raises:
        LaunchError: If the list is malformed (the message names the bad entry).
    """
    if not isinstance(hosts, str) or not hosts.strip():
        raise LaunchError(f"hosts={hosts!r} is not a host list; use e.g. 'localhost:2' or "
                          "'node1:4,node2:4' (host:slots, comma-separated)")
    total = 0
    for part in hosts.split(","):
        name, sep, slots = part.strip().partition(":")
        if not name or not sep or not slots.isdigit() or int(slots) < 1:
            raise LaunchError(f"hosts entry {part!r} in {hosts!r} is malformed; each entry must be "
                              "host:slots with slots a positive integer, e.g. 'localhost:2'")
        total += int(slots)
    return total


def check_script(script: str | os.PathLike[str], cwd: str | os.PathLike[str] | None) -> Path:
    """Return the absolute path of ``script`` (relative: from ``cwd``).

    Raises:
        LaunchError: If it is not a file; the message shows the path looked at.
    """
    path = Path(script)
    if not path.is_absolute() and cwd is not None:
        path = Path(cwd) / path
    path = path.resolve()
    if path.is_dir():
        raise LaunchError(f"script {path} is a folder, not a Python file (from "
                          f"script={str(script)!r}); name the .py file inside it, e.g. "
                          f"{path / 'train.py'}")
    if not path.is_file():
        raise LaunchError(f"script not found: {path} (from script={str(script)!r}); "
                          "check the path (relative paths are taken from cwd)")
    return path


def check_strings(name: str, values: Sequence[str]) -> list[str]:
    """Return ``values`` as a list after checking that each is a ``str``.

    Raises:
        LaunchError: Naming the argument ``name``, the index and the type of the first non-str.
    """
    if isinstance(values, (str, bytes)):
        raise LaunchError(f"{name} must be a sequence of strings, not one string {values!r}; "
                          f"write e.g. {name}=[{values!r}]")
    out = []
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise LaunchError(f"{name}[{index}] = {value!r} is a {type(value).__name__}, not a "
                              f"str; convert it, e.g. str({value!r})")
        out.append(value)
    return out


def check_env(env: Any) -> dict[str, str] | None:
    """Check ``env`` (extra environment variables of a run): ``None`` or a mapping of str to str.

    Returns:
        A plain dict copy (``None`` stays ``None``).

    Raises:
        LaunchError: Naming the first bad entry and how to write it.
    """
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise LaunchError(f"env={env!r} must be a dict of environment variables, e.g. "
                          "env={'TF_CPP_MIN_LOG_LEVEL': '2'}")
    out = {}
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise LaunchError(f"env has the bad variable name {name!r}; names are non-empty "
                              "strings without '='")
        if not isinstance(value, str) or "\0" in value:
            raise LaunchError(f"env[{name!r}] = {value!r} is a {type(value).__name__}, not a str; "
                              f"environment values are strings: write env={{{name!r}: "
                              f"{str(value)!r}}}")
        out[name] = value
    return out


def check_common(timeout: float | None, show: str, output: Any, python: str) -> str:
    """Check the shared options every launcher takes (:class:`course_lib.runner.run.RunOptions`).

    Returns:
        The absolute path of the ``python`` interpreter.

    Raises:
        LaunchError: On a non-positive timeout, an unknown ``show``, an ``output`` that is
            neither None, an ``ipywidgets.Output`` nor callable, or a missing interpreter.
    """
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise LaunchError(f"timeout={timeout!r} must be a positive number of seconds or None")
    if show not in _SHOW:
        raise LaunchError(f"show={show!r} must be one of 'rank0', 'all', 'none'")
    if output is not None and not callable(output) and not hasattr(output, "append_stdout"):
        raise LaunchError(f"output={output!r} must be None (print), an ipywidgets.Output or a "
                          "callable taking one line")
    exe = shutil.which(python)
    if exe is None:
        raise LaunchError(f"python={python!r} is not an executable interpreter")
    return exe


def check_mpirun(env: dict[str, str]) -> None:
    """Check that Open MPI's ``mpirun`` is on the run's PATH (needed by ``controller="mpi"``).

    Args:
        env: The environment the run will get.

    Raises:
        LaunchError: If ``mpirun`` is missing; the message says how to install it.
    """
    if shutil.which("mpirun", path=env.get("PATH")) is None:
        raise LaunchError("controller='mpi' needs Open MPI's mpirun, which is not on PATH; "
                          "install it (apt-get install openmpi-bin, then rebuild Horovod) or "
                          "use controller='gloo'")


def check_int(name: str, value: Any, low: int = 1) -> int:
    """Check that ``value`` is an int (not a bool) >= ``low``; return it.

    Raises:
        LaunchError: Naming the argument and the bound.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise LaunchError(f"{name}={value!r} must be an int >= {low}")
    return value


def check_worker_range(num_workers: int, min_workers: int, max_workers: int,
                       slots: int | None = None) -> None:
    """Check ``1 <= min_workers <= num_workers <= max_workers (<= slots)``.

    Introduced in notebooks/06_beyond_one_machine.ipynb.

    Raises:
        LaunchError: Naming the values that break the order and how to fix them.
    """
    for name, value in (("num_workers", num_workers), ("min_workers", min_workers),
                        ("max_workers", max_workers)):
        check_int(name, value)
    if not min_workers <= num_workers <= max_workers:
        raise LaunchError(f"need min_workers <= num_workers <= max_workers, got {min_workers} <= "
                          f"{num_workers} <= {max_workers}; e.g. min 1, start 2, max 2")
    if slots is not None and max_workers > slots:
        raise LaunchError(f"max_workers={max_workers} exceeds the {slots} slots of the host list; "
                          "add hosts or slots, or lower max_workers")


def check_ports(ports: Sequence[int], host: str = "localhost") -> list[int]:
    """Check that ``ports`` are distinct, valid and free on ``host``.

    Introduced in notebooks/06_beyond_one_machine.ipynb.

    Raises:
        LaunchError: A port out of range, repeated, or in use (the message names it).
    """
    out = []
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
            raise LaunchError(f"port {port!r} must be an int in 1024..65535")
        if port in out:
            raise LaunchError(f"port {port} appears twice in {list(ports)}; give each worker its own")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                raise LaunchError(f"port {port} on {host} is in use (another run still going?); "
                                  "pick another or pass ports=None to choose free ones") from None
        out.append(port)
    return out
