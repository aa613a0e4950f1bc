"""Run a course script's ``main(argv)`` several times in turn in ONE process, for tests/test_scripts.py.

Usage: ``python tests/scripts/runs_in_turn.py SCRIPT '[[flags of run 0], [flags of run 1], ...]'``, alone or
as every rank of ``horovodrun`` (then every rank runs the same list, in the same order; ``hvd.init()`` of the
second and later runs joins the group the first one made). Before each run it prints the JSON line
``{"event": "run", "index": i, "rank": r}`` (r: HOROVOD_RANK, 0 without a launcher), so a test can give each
later line of a rank's output to the run it belongs to. A run that does not return 0 ends the process.

Issue 31: TensorFlow's import and teardown (about 6 CPU-s per process) and horovodrun's start, paid once for
several runs. The script's ``main`` must leave nothing behind that changes the next run: with
``--deterministic`` a run here gives the digests of the same run in a fresh process
(tests/test_scripts.py::test_kill_and_resume_reproduces_uninterrupted_run compares the two).
"""

import json
import os
import runpy
import sys


def main() -> int:
    script, runs = sys.argv[1], json.loads(sys.argv[2])
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` would have it
    module = runpy.run_path(script, run_name=os.path.splitext(os.path.basename(script))[0])
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
    for index, flags in enumerate(runs):
        print(json.dumps({"event": "run", "index": index, "rank": rank}), flush=True)
        code = module["main"](flags)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
