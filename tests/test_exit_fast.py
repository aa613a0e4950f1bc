"""The session's processes skip their last garbage collections at exit (tests/exit_fast/sitecustomize.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXIT_FAST = Path(__file__).resolve().parent / "exit_fast" / "sitecustomize.py"

# In a child started by the session: which sitecustomize ran, and whether running the atexit handlers (as the
# interpreter does at exit) froze the objects.
PROBE = """
import atexit, gc, sitecustomize
before = gc.get_freeze_count()  # not 0: CPython 3.12 starts with a few hundred
atexit._run_exitfuncs()
print(sitecustomize.__file__, int(gc.get_freeze_count() > before + 1000))
"""


def test_a_python_the_session_starts_freezes_gc_at_exit() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    where, removed = done.stdout.split()
    assert Path(where) == EXIT_FAST, f"the child imported {where}, not the session's sitecustomize"
    assert removed == "1", "sitecustomize did not register gc.freeze to run at exit"
