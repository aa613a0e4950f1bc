"""Execute one notebook and hand back the executed notebook on a pipe the kernel cannot reach.

Run by :class:`course_lib.assessment.sandbox.Sandbox` INSIDE the sandbox, as the grading user: it is the PID
namespace's first process, so the kernel it starts (the submission's code) cannot SIGKILL it, and when it exits
every process of the submission ends with it. It makes itself non-dumpable (so the kernel, the same user, cannot
read its memory or open its file descriptors through ``/proc``), ignores SIGINT and SIGTERM, keeps the result pipe
(``--result-fd``) out of the kernel's inheritance, and caps each cell's outputs at ``--max-output-kb`` (megabytes
of output neither fill the grader's memory nor the gradebook).

Introduced in assessment/source/ddp/assessment.ipynb (the room's grading).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys

import nbformat
from nbclient import NotebookClient

__all__ = ["harden", "cap_outputs", "main"]

_PR_SET_DUMPABLE = 4


def harden(result_fd: int | None) -> None:
    """Make this process hard to reach for the submission it runs (the same user): SIGINT and SIGTERM ignored (as
    the PID namespace's first process, SIGKILL from inside cannot reach it), not dumpable (no ``/proc`` access to
    its memory or file descriptors, no ptrace), and ``result_fd`` not inherited by what it starts."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if result_fd is not None:
        os.set_inheritable(result_fd, False)


def cap_outputs(nb: object, max_bytes: int) -> int:
    """Truncate each cell's outputs to ``max_bytes`` of text in all; returns how many cells were cut."""
    cut = 0
    for cell in getattr(nb, "cells", []):
        used, kept = 0, []
        for output in cell.get("outputs", []):
            text = output.get("text") if output.get("output_type") == "stream" else None
            size = len(text) if isinstance(text, str) else len(str(output.get("data", ""))) + len(
                str(output.get("evalue", "")))
            if used + size > max_bytes:
                if isinstance(text, str) and used < max_bytes:
                    output["text"] = text[:max_bytes - used]
                    kept.append(output)
                kept.append(nbformat.v4.new_output("stream", name="stderr",
                                                   text=f"\n[grader: output cut at {max_bytes // 1024} KB]\n"))
                cut += 1
                break
            used += size
            kept.append(output)
        if "outputs" in cell:
            cell["outputs"] = kept
    return cut


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per cell")
    parser.add_argument("--result-fd", type=int, default=None, help="write the executed notebook here (else over "
                        "the input file)")
    parser.add_argument("--max-output-kb", type=int, default=256)
    args = parser.parse_args(argv)
    harden(args.result_fd)
    nb = nbformat.read(args.notebook, as_version=4)
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(args.notebook))}})
    try:
        client.execute()
    except Exception as exc:  # a cell timed out or the kernel died: what ran so far is graded
        print(f"run_notebook: execution stopped: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
    cap_outputs(nb, args.max_output_kb * 1024)
    text = nbformat.writes(nb)
    if args.result_fd is not None:
        with os.fdopen(args.result_fd, "w") as out:
            out.write(text)
    else:
        with open(args.notebook, "w") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
