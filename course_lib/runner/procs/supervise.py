"""A small supervisor program: run several workers as one process, lines tagged by worker.

``python -m course_lib.runner.procs.supervise`` reads a JSON list ``[{"argv": [...], "env": {...}},
...]`` from the ``COURSE_WORKERS_SPEC`` variable, starts one process per entry (this process's
environment plus the entry's ``env``), and forwards every line as ``[i]<stdout>:text`` or
``[i]<stderr>:text`` — the tags of Horovod's Gloo launcher, so :mod:`course_lib.runner.runlog`
parses them. When one worker fails, the others get SIGTERM, then SIGKILL
(:func:`course_lib.runner.procs.watchdog.end_tree`; a collective would otherwise wait for the dead one), and
the supervisor exits with the failed worker's status (128 + signal when it was killed).
:func:`course_lib.runner.multiworker.run_workers` starts it (:func:`course_lib.runner.launchers.workers` builds its spec)
and owns the streaming, time-out and clean-up of the whole process tree.

Introduced in notebooks/06_beyond_one_machine.ipynb.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from course_lib.runner.procs.watchdog import end_tree

__all__ = ["SPEC_VAR", "supervise"]

SPEC_VAR = "COURSE_WORKERS_SPEC"


def _status(code: int | None) -> int:
    if code is None:  # still running: cannot happen after wait()
        return 1
    return code if code >= 0 else 128 - code


def supervise(specs: list[dict], grace_s: float = 3.0) -> int:
    """Start every worker, tag and forward their lines, end the rest when one fails.

    Args:
        specs: ``[{"argv": [...], "env": {...}}, ...]``, one entry per worker.
        grace_s: Seconds between SIGTERM and SIGKILL for the others after a failure.

    Returns:
        0 when all workers succeeded, else the first failed worker's status.
    """
    lock = threading.Lock()
    procs = [subprocess.Popen(spec["argv"], env={**os.environ, **spec["env"]},
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for spec in specs]

    def pump(index: int, pipe: Any, name: str, out: Any) -> None:
        for raw in iter(pipe.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            with lock:
                out.write(f"[{index}]<{name}>:{text}\n")
                out.flush()

    threads = [threading.Thread(target=pump, args=(i, pipe, name, out), daemon=True)
               for i, proc in enumerate(procs)
               for pipe, name, out in ((proc.stdout, "stdout", sys.stdout),
                                       (proc.stderr, "stderr", sys.stderr))]
    for thread in threads:
        thread.start()
    status = 0
    while True:
        codes = [proc.poll() for proc in procs]  # poll every worker, not just the first live one
        if all(code is not None for code in codes):
            break
        failed = [(i, code) for i, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            index, code = failed[0]
            status = _status(code)
            with lock:
                print(f"worker {index} exited with status {code}; ending the other workers",
                      file=sys.stderr, flush=True)
            end_tree(procs, grace_s=(0.0, grace_s), interrupt=False)
            break
        time.sleep(0.1)
    for thread in threads:
        thread.join(timeout=5.0)
    if status == 0:
        codes = [p.wait() for p in procs]
        bad = [c for c in codes if c != 0]
        status = _status(bad[0]) if bad else 0
    return status


if __name__ == "__main__":
    sys.exit(supervise(json.loads(os.environ[SPEC_VAR])))
