"""The learner's lab refuses the instructors' folder, whatever the URL.

Hiding ``instructor/`` from the file browser (``ContentsManager.hide_globs``) only keeps it out of
listings: a typed ``/files/instructor/...``, ``/api/contents/instructor/...`` or
``/lab/tree/instructor/...`` still served it. :class:`CourseContentsManager` is Jupyter's default
contents manager with one rule added: a path whose first folder is one of
:data:`course_lib.environment.lab.REFUSED_ROOTS` (after resolving ``..``, symbolic links and letter
case) does not exist for the server — reading, saving, renaming to or from, deleting, copying and
checkpointing it answer 404, the ``/view`` handler (which asks ``file_exists``) refuses it, and
``/files`` is served by :class:`CourseFileHandler`, which applies the same rule to the file on disk. ``make lab`` starts the lab with it
(:func:`course_lib.environment.lab.lab_command`).

What it does not do: a kernel (or a terminal) runs as the learner and can read any file on disk.
In a self-paced clone the solutions are on the learner's disk anyway; the room edition ships
without ``instructor/``.

Introduced in notebooks/00_setup.ipynb (README: "make lab").
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import AuthenticatedFileHandler
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web
from traitlets import List, Unicode, default

from course_lib.environment.lab import REFUSED_ROOTS

__all__ = ["CourseContentsManager", "CourseFileHandler", "first_folder"]


def first_folder(path: str) -> str:
    """The first folder of an API path after lexical normalisation (``a/../instructor/x`` -> ``instructor``).

    Args:
        path: A contents-API path, relative to the served root ("" is the root).

    Returns:
        Its first component, case-folded ("" for the root or a path that climbs above it).
    """
    normal = posixpath.normpath("/" + path.replace("\\", "/")).lstrip("/")
    return normal.split("/", 1)[0].casefold() if normal not in ("", ".") else ""


class CourseFileHandler(AuthenticatedFileHandler):
    """Jupyter's ``/files/`` handler (files straight from disk), 404 for what the contents manager refuses."""

    def validate_absolute_path(self, root: str, absolute_path: str) -> str:
        """Tornado's and Jupyter's checks, then the course's refused folders."""
        path = super().validate_absolute_path(root, absolute_path)
        relative = Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
        manager = self.contents_manager
        if isinstance(manager, CourseContentsManager) and manager.refuses(relative):
            self.log.info("Refusing /files/%s: the instructors' folder is not served in the learner's lab", relative)
            raise web.HTTPError(404)
        return path


class CourseContentsManager(AsyncLargeFileManager):
    """Jupyter's file contents manager, refusing :attr:`refused_roots` with 404 on every operation."""

    refused_roots = List(Unicode(), default_value=list(REFUSED_ROOTS), config=True,
                         help="Top-level folders of the served root that the lab must never serve or change.")

    @default("files_handler_class")
    def _files_handler_class_default(self) -> type:
        return CourseFileHandler

    def refuses(self, path: str) -> bool:
        """True when ``path`` (an API path) lies in a refused folder, lexically or once resolved on disk."""
        roots = {root.casefold() for root in self.refused_roots}
        if first_folder(path) in roots:
            return True
        served = Path(self.root_dir).resolve()
        try:
            target = (served / posixpath.normpath("/" + path).lstrip("/")).resolve()
            relative = target.relative_to(served)
        except (OSError, ValueError):
            return False  # outside the root: Jupyter itself refuses it
        return bool(relative.parts) and relative.parts[0].casefold() in roots

    def _guard(self, *paths: str) -> None:
        for path in paths:
            if self.refuses(path):
                self.log.info("Refusing %s: the instructors' folder is not served in the learner's lab", path)
                raise web.HTTPError(404, f"No such file or directory: {path}")

    async def is_hidden(self, path: str) -> bool:
        """Refused paths count as hidden (the /files and contents handlers then answer 404)."""
        return self.refuses(path) or bool(await super().is_hidden(path))

    async def file_exists(self, path: str) -> bool:
        """False for refused paths (the /view handler asks this)."""
        return not self.refuses(path) and bool(await super().file_exists(path))

    async def dir_exists(self, path: str) -> bool:
        """False for refused folders."""
        return not self.refuses(path) and bool(await super().dir_exists(path))

    async def get(self, path: str, content: bool = True, type: str | None = None, format: str | None = None,
                  require_hash: bool = False) -> dict[str, Any]:
        """Jupyter's ``get``, 404 for refused paths."""
        self._guard(path)
        return await super().get(path, content=content, type=type, format=format, require_hash=require_hash)

    async def save(self, model: dict[str, Any], path: str = "") -> dict[str, Any]:
        """Jupyter's ``save``, 404 for refused paths."""
        self._guard(path)
        return await super().save(model, path)

    async def delete_file(self, path: str) -> None:
        """Jupyter's ``delete_file``, 404 for refused paths."""
        self._guard(path)
        await super().delete_file(path)

    async def rename_file(self, old_path: str, new_path: str) -> None:
        """Jupyter's ``rename_file``, 404 when either end is refused."""
        self._guard(old_path, new_path)
        await super().rename_file(old_path, new_path)

    async def copy(self, from_path: str, to_path: str | None = None) -> dict[str, Any]:
        """Jupyter's ``copy``, 404 when either end is refused."""
        self._guard(from_path, *([to_path] if to_path else []))
        return await super().copy(from_path, to_path)

    async def create_checkpoint(self, path: str) -> dict[str, Any]:
        """Jupyter's ``create_checkpoint``, 404 for refused paths."""
        self._guard(path)
        return await super().create_checkpoint(path)

    async def list_checkpoints(self, path: str) -> list[dict[str, Any]]:
        """Jupyter's ``list_checkpoints``, 404 for refused paths."""
        self._guard(path)
        return await super().list_checkpoints(path)

    async def restore_checkpoint(self, checkpoint_id: str, path: str) -> None:
        """Jupyter's ``restore_checkpoint``, 404 for refused paths."""
        self._guard(path)
        await super().restore_checkpoint(checkpoint_id, path)

    async def delete_checkpoint(self, checkpoint_id: str, path: str) -> None:
        """Jupyter's ``delete_checkpoint``, 404 for refused paths."""
        self._guard(path)
        await super().delete_checkpoint(checkpoint_id, path)
