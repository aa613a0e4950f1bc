"""The rank wrapper: put one rank on the cores or GPU its launcher granted, then become the rank.

The launcher starts every process of a run as ``python -m course_lib.runner.place_rank PROGRAM ARGS``
(``horovodrun ... python -m course_lib.runner.place_rank python script.py ...``) with the run's
shares in ``$COURSE_PLACEMENT`` (:class:`course_lib.training.machine.placement.Placement`). The wrapper finds
its own share from the variables its launcher set (:func:`course_lib.training.machine.placement.rank_index`),
confines itself to the share's cores (``sched_setaffinity``, inherited across ``exec`` by every thread
the rank will start), sets ``CUDA_VISIBLE_DEVICES`` to the share's GPU (or to nothing for CPU ranks on a
GPU machine), records the share in ``$COURSE_GRANT`` for the script, and replaces itself with
``PROGRAM``: no extra process stays behind, and any script is placed, course script or not.

Without ``$COURSE_PLACEMENT`` it changes nothing. A granted core the process may not use (a container's
cpuset narrower than the launcher's) is dropped; if none is left, the rank runs unpinned and says so
on stderr.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import os
import sys

from course_lib.training.machine.hardware import cpu_core_ids, span
from course_lib.training.machine.placement import GRANT_ENV, PLACEMENT_ENV, Placement, PlacementError, rank_index

__all__ = ["placed_environment", "main"]


def placed_environment(env: dict[str, str]) -> tuple[dict[str, str], tuple[int, ...]]:
    """The environment and cores of this rank under ``env[PLACEMENT_ENV]`` (nothing changed without it).

    Returns:
        ``(environment for the rank, cores to confine it to)``; ``()`` cores: leave the affinity.

    Raises:
        PlacementError: A malformed ``$COURSE_PLACEMENT``.
    """
    text = env.get(PLACEMENT_ENV)
    if not text:
        return env, ()
    placement = Placement.from_env(text)
    share = placement.shares[rank_index(env, placement.hosts) % len(placement.shares)]
    out = {k: v for k, v in env.items() if k != PLACEMENT_ENV}
    before = cpu_core_ids()
    cores = tuple(c for c in share.cpus if c in before)
    if share.cpus and not cores:
        print(f"place_rank: granted cores {span(share.cpus)} are outside this process's cores "
              f"{span(before)} (a container's cpuset?): running unpinned", file=sys.stderr, flush=True)
    if share.gpus:
        out["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, share.gpus))
    elif placement.hide_gpus:
        out["CUDA_VISIBLE_DEVICES"] = ""
    out[GRANT_ENV] = (f"cpus={span(cores)};gpus={','.join(map(str, share.gpus))};of={span(before)}")
    return out, cores


def main(argv: list[str] | None = None) -> int:
    """Place this process, then ``exec`` the rank's program (returns only on an error)."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m course_lib.runner.place_rank PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    try:
        env, cores = placed_environment(dict(os.environ))
    except PlacementError as exc:
        print(f"place_rank: {exc}", file=sys.stderr)
        return 2
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)  # only this thread exists: exec'd program inherits it
    try:
        os.execvpe(args[0], args, env)
    except OSError as exc:
        print(f"place_rank: cannot start {args[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
