"""The command that starts a pytest run of a test's own, on test files that hold no notebook (issue 31).

``-p no:nbval``: loading nbval costs 3.7 CPU-s per pytest process (nbformat -> jsonschema -> rfc3987_syntax, which
builds a grammar at import), and a run without a notebook does not need it. ``-p no:cacheprovider``: no
``.pytest_cache`` in the folder under test. Used by test_check_time, test_leftovers, test_skip_policy and
test_workers; a run of notebooks (test_busy_neighbour, test_notebook_stderr) builds its own command with nbval.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

#: ``[*PYTEST_WITHOUT_NBVAL, ...options..., path]`` for ``subprocess.run``.
PYTEST_WITHOUT_NBVAL: tuple[str, ...] = (sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:nbval")

#: The notebooks' harness (tests/notebooks/): copied beside scratch notebooks as their ``conftest.py``.
HARNESS_FOLDER = Path(__file__).resolve().parent / "notebooks"


def copy_notebook_harness(folder: Path) -> None:
    """Put the notebooks' harness beside scratch notebooks in ``folder``: ``harness.py`` as ``conftest.py`` (a
    pytest there with ``--nbval`` then checks stderr as the course does) and the allow list it reads."""
    shutil.copy2(HARNESS_FOLDER / "harness.py", folder / "conftest.py")
    shutil.copy2(HARNESS_FOLDER / "stderr_allow.txt", folder / "stderr_allow.txt")
