"""Folders opened for traversal only (o+x) while a test's Unix users run the course's Python, then restored.

On this machine and in CI the venv's Python is pyenv's, under /root (mode 0700): the room's learners (tests/test_room.py)
and the assessment's learner accounts (tests/test_assessment_room.py) could not run it. A test opens each folder above
the paths its users need, for traversal only, and restores the exact modes when it is done (also when it fails)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable


def open_for_traversal(paths: Iterable[Path]) -> dict[Path, int]:
    """Add o+x to every folder above ``paths`` that lacks it; returns each changed folder's old mode."""
    opened: dict[Path, int] = {}
    for needed in paths:
        for folder in reversed(needed.resolve().parents):
            mode = os.stat(folder).st_mode & 0o7777
            if not mode & 0o001 and folder not in opened:
                opened[folder] = mode
                os.chmod(folder, mode | 0o001)
    return opened


def restore(opened: dict[Path, int]) -> None:
    """Put back the modes :func:`open_for_traversal` changed."""
    for folder, mode in opened.items():
        os.chmod(folder, mode)
