"""A maintainers' tool (``tools/maintainers/<name>.py``) for the tests, loaded by its path (tools/ on sys.path would
shadow the standard library's ``site``), once per session under the name tools/maintainers/run_notebooks.py gives it
too (``course_tools_<name>``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
MAINTAINERS = ROOT / "tools" / "maintainers"


def load_tool(name: str) -> ModuleType:
    """``tools/maintainers/<name>.py`` as a module (the same object on every call)."""
    spec = importlib.util.spec_from_file_location(f"course_tools_{name}", MAINTAINERS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    if spec.name not in sys.modules:
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]
