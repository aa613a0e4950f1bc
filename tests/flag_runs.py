"""Run a script's ``__main__`` with several flag sets in ONE fresh process (issue 31: a process per bad flag set
cost an interpreter start each). Used by tests/test_scripts.py and tests/test_allreduce_bench.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_RUNNER = """
import contextlib, io, json, runpy, sys, traceback
script, with_stdout, runs = sys.argv[1], sys.argv[2] == "1", []
for flags in json.loads(sys.argv[3]):
    sys.argv, out, code = [script, *flags], io.StringIO(), None
    with contextlib.redirect_stderr(out), (contextlib.redirect_stdout(out) if with_stdout else contextlib.nullcontext()):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code
        except BaseException:
            traceback.print_exc()
    runs.append({"code": code, "out": out.getvalue()})
print(json.dumps({"runs": runs, "tensorflow": "tensorflow" in sys.modules}))
"""


def run_flag_sets(script: Path, flag_sets: list[list[str]], *, with_stdout: bool = False, timeout: float = 60,
                  cwd: Path | None = None) -> dict:
    """Each flag set as ``script``'s ``__main__`` in one fresh Python, one after another.

    Returns:
        ``{"runs": [{"code": exit status or None, "out": stderr (and stdout when with_stdout)}, ...],
        "tensorflow": whether any run imported TensorFlow}``; a crash other than ``SystemExit`` shows as its
        traceback in ``out`` with ``code`` None.
    """
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(script), "1" if with_stdout else "0",
                           json.dumps(flag_sets)], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
