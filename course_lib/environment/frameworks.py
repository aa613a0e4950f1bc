"""Notebook 07's second venv (PyTorch, JAX, Keras 3): where it is, its python, and what it holds.

``tools/setup_frameworks.sh`` (run by ``make lab`` and ``make test``) builds it beside the course's venv, never in it
(docs/decisions/frameworks-venv.md). The notebook's kernel stays in the course's venv; notebook 07 starts its
PyTorch and JAX scripts as processes of this venv's python (``python=`` of the launchers), and ``make doctor``
reports its versions through :func:`frameworks_versions`.

Where: ``$COURSE_FRAMEWORKS_VENV``; else ``$COURSE_VENV`` with ``-07`` added (the Makefile exports
``COURSE_VENV``); else ``.venv-07`` in the course folder.

Introduced in notebooks/07_frameworks.ipynb.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from course_lib.training.files import course_root

__all__ = ["SETUP_HINT", "frameworks_venv", "frameworks_python", "frameworks_versions"]

SETUP_HINT = ("notebook 07's venv (.venv-07: PyTorch, JAX, Keras 3) is missing: run `make setup` in the course "
              "folder (it runs tools/setup_frameworks.sh)")

_PROBE = """import json, os
os.environ["KERAS_BACKEND"] = "jax"
import jax, keras, torch, torch.distributed as dist
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gloo": dist.is_gloo_available(),
                  "nccl": dist.is_nccl_available(), "jax": jax.__version__, "keras": keras.__version__,
                  "keras_backend": keras.backend.backend()}))"""


def frameworks_venv() -> Path:
    """The second venv's folder (it may not exist)."""
    named = os.environ.get("COURSE_FRAMEWORKS_VENV")
    if named:
        return Path(named)
    main = os.environ.get("COURSE_VENV")
    return Path(main.rstrip("/") + "-07") if main else course_root() / ".venv-07"


def frameworks_python(required: bool = True) -> str | None:
    """The second venv's python, as a path string.

    Args:
        required: Raise when it is missing (else return None).

    Raises:
        FileNotFoundError: It is missing and ``required`` (the message says how to set it up).
    """
    python = frameworks_venv() / "bin" / "python"
    if python.exists():
        return str(python)
    if required:
        raise FileNotFoundError(f"{python} not found: {SETUP_HINT}")
    return None


def frameworks_versions(timeout: float = 120.0) -> dict[str, object]:
    """What the second venv holds: torch (and its CUDA, Gloo, NCCL), jax, keras and Keras's backend.

    Returns:
        The versions, or ``{"error": why}`` when the venv is missing or does not import them.
    """
    python = frameworks_python(required=False)
    if python is None:
        return {"error": SETUP_HINT}
    try:
        probe = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{python} could not be asked ({exc})"}
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"{python} does not import torch, jax and keras ({last}): run `COURSE_FORCE_SETUP=1 make setup`"}
    return json.loads(probe.stdout.strip().splitlines()[-1])
