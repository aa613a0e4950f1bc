"""Where the test suite's time goes: wall time and busy cores per test, and per file (issue 31).

A pytest plugin and a summary, both off unless asked for:

    COURSE_SUITE_PROFILE=/tmp/profile.jsonl .venv/bin/python -m pytest -p tools.maintainers.suite_profile ...
    .venv/bin/python -m tools.maintainers.suite_profile /tmp/profile.jsonl      # the table, slowest files first

For each test the plugin writes one JSON line: its node id, start and stop (seconds since the epoch), and
the machine's busy CPU-seconds over that interval, read from ``/proc/stat`` (every process on the machine,
so kernels, ``horovodrun`` ranks and the test's own subprocesses are counted; so is any other load, which is
why the machine should be otherwise idle). Several pytest-xdist workers may append to the same file. The
summary divides busy CPU-seconds by wall seconds: a file that averages 0.6 busy cores of 2 leaves the
rest idle, and is worth running beside another.

Where the machine has cgroup v1's cpuacct controller and the worker may write it (root), each worker also moves
into a cpuacct cgroup of its own at its first test, and each line gets ``own_cpu_s``: the CPU-seconds of that
worker and every process it started (ranks, kernels, browsers, orphans included) during the test. That is the
test's own cost on a machine where two workers share the cores; ``busy_cpu_s`` counts both.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Iterator

import pytest

ENV = "COURSE_SUITE_PROFILE"
#: How tools/maintainers/check_time.py loads this plugin through PYTEST_ADDOPTS.
PLUGIN_OPTION = "-p tools.maintainers.suite_profile"


def pytest_configure(config: pytest.Config) -> None:
    """Keep the plugin out of the pytest runs that tests start in scratch copies of the course (they inherit
    PYTEST_ADDOPTS, and a copy without tools/maintainers/ cannot import this module: a fresh clone's profiled run
    failed tests/test_extending.py that way). The session that loaded it keeps profiling. A pytest-xdist
    controller leaves it in: its workers, which run the tests, start after it and load the plugin from there."""
    opts = os.environ.get("PYTEST_ADDOPTS", "")
    # A worker is told by its config, not by $PYTEST_XDIST_WORKER, which the pytest runs its tests start inherit.
    distributing = not hasattr(config, "workerinput") and (config.getoption("numprocesses", None) or 0) != 0
    if PLUGIN_OPTION in opts and not distributing:
        rest = " ".join(opts.replace(PLUGIN_OPTION, " ").split())
        if rest:
            os.environ["PYTEST_ADDOPTS"] = rest
        else:
            del os.environ["PYTEST_ADDOPTS"]


def busy_cpu_seconds() -> float:
    """CPU-seconds the whole machine has spent busy since boot (all of ``/proc/stat``'s cpu line but idle and iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(v) for v in fields[:8]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_OWN: dict[str, Path] = {}


def _own_group() -> Path | None:
    """This worker's cpuacct cgroup, made (and joined) at the first call; None where there is none to make."""
    if "group" not in _OWN:
        group = CPUACCT / f"course-profile-{os.getpid()}"
        try:
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            return None
        _OWN["group"] = group
    return _OWN["group"]


def own_cpu_seconds() -> float | None:
    """CPU-seconds of this worker's cpuacct cgroup since it was made (None without one)."""
    group = _own_group()
    return None if group is None else int((group / "cpuacct.usage").read_text()) / 1e9


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Leave the worker's cpuacct cgroup and remove it (kept while a process of it still runs)."""
    group = _OWN.pop("group", None)
    if group is not None:
        try:
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()
        except OSError:
            pass


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    out = os.environ.get(ENV)
    if not out:
        return (yield)
    start, busy, own = time.time(), busy_cpu_seconds(), own_cpu_seconds()
    try:
        return (yield)
    finally:
        own_after = own_cpu_seconds()
        line = {"test": item.nodeid, "start": start, "stop": time.time(),
                "busy_cpu_s": busy_cpu_seconds() - busy,
                "own_cpu_s": None if own is None or own_after is None else round(own_after - own, 2),
                "worker": getattr(item.config, "workerinput", {}).get("workerid", "")}
        with open(out, "a") as stream:
            stream.write(json.dumps(line) + "\n")


def summarise(path: Path, top: int = 40) -> str:
    """One row per test file (a notebook counts as one file): tests, wall s, busy CPU-s, busy cores, and the
    file's own CPU-s (0 where the profile has none: no cpuacct cgroup, or an older profile)."""
    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    first, last = float("inf"), 0.0
    for raw in path.read_text().splitlines():
        rec = json.loads(raw)
        row = rows[rec["test"].split("::")[0]]
        row[0] += 1
        row[1] += rec["stop"] - rec["start"]
        row[2] += rec["busy_cpu_s"]
        row[3] += rec.get("own_cpu_s") or 0.0
        first, last = min(first, rec["start"]), max(last, rec["stop"])
    lines = [f"{'file':58} {'tests':>5} {'wall s':>8} {'CPU s':>8} {'cores':>5} {'own CPU s':>9}"]
    total = [0, 0.0, 0.0, 0.0]
    for name, (count, wall, busy, own) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        total = [total[0] + count, total[1] + wall, total[2] + busy, total[3] + own]
        if len(lines) <= top:
            lines.append(f"{name[-58:]:58} {count:5d} {wall:8.1f} {busy:8.1f} {busy / max(wall, 1e-9):5.2f} "
                         f"{own:9.1f}")
    lines.append(f"{'all (sum of test times)':58} {total[0]:5d} {total[1]:8.1f} {total[2]:8.1f} "
                 f"{total[2] / max(total[1], 1e-9):5.2f} {total[3]:9.1f}")
    lines.append(f"first test start to last test stop: {last - first:.1f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise(Path(sys.argv[1])))
