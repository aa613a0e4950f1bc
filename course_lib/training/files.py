"""Atomic file writes, so that no reader ever sees a half-written file.

Every file the course writes (run records, checkpoints' metadata, benchmark results) goes
through these helpers: the content is written to a temporary file in the same directory,
flushed to disk, then renamed over the target in one step. :func:`cache_dir` names the folder where the
course keeps what it can rebuild (set-up's Horovod wheel, horovodrun's build answers).

Introduced in notebooks/02_mirrored_strategy.ipynb (run records saved between cells).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "cache_dir", "course_root"]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically.

    Args:
        path: Target file. Its parent directory is created if missing.
        data: The complete content.

    Returns:
        The target path.

    Raises:
        OSError: If the directory cannot be created or written; the target is left untouched
            and no temporary file is left behind.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically. See :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int = 2) -> Path:
    """Serialise ``obj`` as JSON and write it to ``path`` atomically.

    Args:
        path: Target file.
        obj: Any JSON-serialisable object.
        indent: Indentation of the JSON text.

    Returns:
        The target path.

    Raises:
        TypeError: If ``obj`` is not JSON-serialisable (raised before anything is written).
    """
    text = json.dumps(obj, indent=indent, sort_keys=True) + "\n"
    return atomic_write_text(path, text)


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The course's cache folder: ``$COURSE_BUILD_CACHE``, else ``$XDG_CACHE_HOME/course-dl``, else
    ``~/.cache/course-dl`` (not created here). Used by ``tools/wheel_cache.py`` and
    :mod:`course_lib.runner.horovodrun`."""
    env = os.environ if env is None else env
    if env.get("COURSE_BUILD_CACHE"):
        return Path(env["COURSE_BUILD_CACHE"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "course-dl"


def course_root() -> Path:
    """The course folder (the checkout holding ``course_lib/``, ``notebooks/``, ``source_code/``).

    Returns:
        The absolute path of the folder above the ``course_lib`` package.
    """
    return Path(__file__).resolve().parents[2]
