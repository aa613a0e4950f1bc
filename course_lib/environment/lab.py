"""Start JupyterLab the way the course does (``make lab``), for people and for tests.

One place builds the command, so the browser tests start exactly the lab a learner gets:
the course's root folder (so that learners can open ``source_code/`` and ``course_lib/`` next to
the notebooks, as the notebooks ask them to), opening on ``notebooks/00_setup.ipynb``, with
``instructor/`` (the exercises' solutions) hidden from the file browser AND refused by the server
(:class:`course_lib.environment.course_contents.CourseContentsManager` answers 404 to a typed
``/files/instructor/...`` or ``/api/contents/instructor/...``); the venv's ``python3`` kernel, no
browser opened, and no news or update checks (the lab must work on a closed network).

Introduced in notebooks/00_setup.ipynb (README: "make lab").
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from course_lib.training.files import course_root

__all__ = ["COURSE_DIR", "NOTEBOOKS_DIR", "HIDDEN", "REFUSED_ROOTS", "CONTENTS_MANAGER", "FIRST_NOTEBOOK",
           "lab_command", "main"]

COURSE_DIR = course_root()
NOTEBOOKS_DIR = COURSE_DIR / "notebooks"
FIRST_NOTEBOOK = "notebooks/00_setup.ipynb"
# Top-level folders the learner's lab never serves, whatever the URL (the exercises' solutions).
REFUSED_ROOTS = ("instructor",)
CONTENTS_MANAGER = "course_lib.environment.course_contents.CourseContentsManager"
# Names the learner's file browser does not list: Jupyter's own defaults, the refused folders,
# and what runs write or caches hold.
HIDDEN = ("__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*~", "*.egg-info", *REFUSED_ROOTS,
          "artifacts")


def lab_command(*, port: int = 8888, ip: str = "127.0.0.1", token: str | None = None,
                notebook_dir: Path | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The argument list that starts the course's JupyterLab.

    Args:
        port: TCP port to listen on.
        ip: Address to bind (loopback by default; use ``0.0.0.0`` on a shared lab machine).
        token: Login token; ``None`` keeps Jupyter's default (a random token printed at start).
        notebook_dir: Folder served (default: the course's root; the lab then opens on
            :data:`FIRST_NOTEBOOK`).
        extra: More ``--Flag=value`` arguments appended as they are.

    Returns:
        A command for :func:`subprocess.Popen` (never a shell string).

    Raises:
        ValueError: If ``port`` is not in 1..65535.
    """
    if not 0 < port < 65536:
        raise ValueError(f"port must be in 1..65535, got {port}")
    root = Path(notebook_dir) if notebook_dir is not None else COURSE_DIR
    command = [sys.executable, "-m", "jupyterlab",
               f"--notebook-dir={root}", f"--ServerApp.ip={ip}",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               "--ServerApp.open_browser=False", "--LabApp.news_url=",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--MappingKernelManager.default_kernel_name=python3",
               f"--ServerApp.contents_manager_class={CONTENTS_MANAGER}",
               f"--ContentsManager.hide_globs={list(HIDDEN)!r}"]
    if (root / FIRST_NOTEBOOK).is_file():
        command.append(f"--LabApp.default_url=/lab/tree/{FIRST_NOTEBOOK}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")  # containers and CI machines often run as root
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    command.extend(extra)
    return command


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m course_lib.environment.lab [--port N] [--ip ADDR]``: replace this process with JupyterLab."""
    parser = argparse.ArgumentParser(description="Start the course's JupyterLab.")
    parser.add_argument("--port", type=int, default=8888, help="port to listen on")
    parser.add_argument("--ip", default="127.0.0.1", help="address to bind (0.0.0.0 for a lab room)")
    args = parser.parse_args(argv)
    command = lab_command(port=args.port, ip=args.ip)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
