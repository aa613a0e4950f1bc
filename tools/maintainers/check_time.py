"""What the course's own check costs, recorded run by run (issue 31).

Two measurements, each appended as JSON lines to ``tools/maintainers/results/<date>-<host>-check-time.jsonl``:

    .venv/bin/python -m tools.maintainers.check_time fresh --runs 3    # a fresh clone's CI, set-up included
    .venv/bin/python -m tools.maintainers.check_time busy --runs 3     # the notebooks' strict nbval beside a busy core

``fresh`` clones this repository's committed HEAD into a scratch folder and runs ``CI=true bash .ci/run``
there (what CI does), so nothing of this checkout's venv or build is reused. ``busy`` runs ``make test-busy``
(every notebook under strict nbval while one core is kept busy: tests/notebooks/harness.py). Each line holds the
wall seconds, the machine's busy CPU-seconds over the run (``/proc/stat``: every process, so run it on an
otherwise idle machine), the average busy cores (CPU-seconds / wall) and that over the machine's cores
(utilisation), the exit status, the set-up time that ``tools/setup.sh`` printed, the load average before,
the machine's single-core speed just before (``speed_probe_s``: this VM's speed varies up to 2x between runs;
lower is faster), how many processes outlived the run (``leftovers``: orphans the driver adopted, ended
afterwards), and the commit. The driver is a child subreaper: an interrupt (Ctrl+C, or SIGINT/SIGTERM to the
driver alone) ends every process of the run, daemons that left its session included (SIGINT, 30 s for
pytest's teardown, then SIGTERM and SIGKILL). The whole output of each run is kept in ``build/check-time/`` (not committed), with the per-test
profile of tools/maintainers/suite_profile.py beside it (``<log>.profile.jsonl``; ``python -m tools.maintainers.suite_profile
FILE`` sums it per file). ``--summary``
prints the table of a results file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from tools.maintainers import suite_profile
from course_lib.environment.machine import describe_machine, load_average, speed_probe
from course_lib.runner.procs.watchdog import (
    alive, become_subreaper, end_tree, is_subreaper, reap_adopted, scan_descendants)

ROOT = Path(__file__).resolve().parents[2]
SETUP_DONE = re.compile(r"\[setup\] done in (\d+) s")
TEARDOWN_GRACE_S = (30.0, 5.0)  # after SIGINT (pytest's fixtures tear down), after SIGTERM


def end_run(proc: subprocess.Popen, grace_s: tuple[float, float] = TEARDOWN_GRACE_S) -> int:
    """End ``proc``'s session and its descendants, and, in the driver (a subreaper, whose every child is the
    run's), the orphans it adopted; return how many were alive."""
    tracked: dict = {}
    root = os.getpid() if is_subreaper() else proc.pid

    def targets() -> list:
        scan_descendants(root, tracked)
        return alive(tracked.values())

    def reap() -> None:
        proc.poll()
        if root != proc.pid:  # adopted orphans are our children now: do not leave them as zombies
            reap_adopted(proc.pid)

    found = len(targets())
    end_tree(targets, grace_s=grace_s, group=proc.pid, reap=reap)
    reap()
    return found


def as_driver() -> None:
    """Make this process the runs' driver: orphans of a run come to it, and SIGTERM ends it like Ctrl+C."""
    become_subreaper()  # a process that leaves a run's tree is re-parented to the driver, not to init
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # timed ends the run's tree


def timed(command: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None,
          grace_s: tuple[float, float] = TEARDOWN_GRACE_S) -> dict:
    """Run ``command`` with its output in ``log``; wall, busy CPU-seconds and exit status. Interrupted, it
    ends every process of the run (``grace_s`` after SIGINT and after SIGTERM) before it raises."""
    load, speed = load_average(), speed_probe()
    busy, start = suite_profile.busy_cpu_seconds(), time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            rc = proc.wait()
        except BaseException:  # Ctrl+C, or SIGTERM (main): nothing of the run may go on without us
            end_run(proc, grace_s)
            raise
    wall, cpu = time.monotonic() - start, suite_profile.busy_cpu_seconds() - busy
    leftovers = end_run(proc, (2.0, 2.0))  # the run ended: whatever of it is still alive outlived it
    cores = os.cpu_count() or 1
    text = log.read_text(errors="replace")
    setup = SETUP_DONE.search(text)
    passed = re.findall(r"=+ (.*) in [\d.]+s", text)
    return {"rc": rc, "wall_s": round(wall, 1), "busy_cpu_s": round(cpu, 1), "busy_cores": round(cpu / wall, 2),
            "utilisation": round(cpu / wall / cores, 3), "cores": cores, "setup_s": int(setup.group(1)) if setup else None,
            "pytest_summaries": passed, "load_before": load,
            "speed_probe_s": speed, "leftovers": leftovers}


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def profiled(env: dict[str, str], profile: Path) -> dict[str, str]:
    """``env`` plus the per-test profile of tools/maintainers/suite_profile.py, written to ``profile``."""
    opts = " ".join(filter(None, [env.get("PYTEST_ADDOPTS", ""), suite_profile.PLUGIN_OPTION]))
    return {**env, "PYTEST_ADDOPTS": opts, "COURSE_SUITE_PROFILE": str(profile)}


def fresh_run(keep_log: Path) -> dict:
    """One fresh clone of HEAD, checked as CI does (per-test profile beside the log)."""
    scratch = Path(tempfile.mkdtemp(prefix="course-fresh-"))
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(scratch / "course")], check=True)
        env = {**os.environ, "CI": "true"}
        env.pop("VIRTUAL_ENV", None)
        return timed(["bash", ".ci/run"], scratch / "course", keep_log, profiled(env, keep_log.with_suffix(".profile.jsonl")))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def busy_run(keep_log: Path) -> dict:
    """The notebooks under strict nbval with a busy neighbour (make test-busy), in this checkout."""
    return timed(["make", "--no-print-directory", "test-busy"], ROOT, keep_log,
                 profiled(dict(os.environ), keep_log.with_suffix(".profile.jsonl")))


def summary(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = [f"{'kind':6} {'commit':9} {'rc':>3} {'wall s':>7} {'set-up s':>8} {'CPU s':>7} {'cores':>5} {'util':>5} "
             f"{'probe s':>7}"]
    for r in rows:
        lines.append(f"{r['kind']:6} {r['commit']:9} {r['rc']:3d} {r['wall_s']:7.0f} {str(r['setup_s'] or '-'):>8} "
                     f"{r['busy_cpu_s']:7.0f} {r['busy_cores']:5.2f} {r['utilisation']:5.2f} "
                     f"{str(r.get('speed_probe_s', '-')):>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["fresh", "busy"], nargs="?")
    parser.add_argument("--runs", type=int, default=1, help="how many runs, one after another (default 1)")
    parser.add_argument("--out", type=Path, help="results file (default tools/maintainers/results/<date>-<host>-check-time.jsonl)")
    parser.add_argument("--summary", type=Path, help="print the table of a results file and exit")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(args.summary))
        return 0
    if args.kind is None:
        parser.error("say fresh or busy (or --summary FILE)")
    if args.runs < 1:
        parser.error(f"--runs must be 1 or more, got {args.runs}")
    as_driver()
    machine = describe_machine()
    out = args.out or ROOT / "tools" / "maintainers" / "results" / f"{date.today()}-vm-check-time.jsonl"
    worst = 0
    for index in range(args.runs):
        tested = commit()   # before the run: HEAD may move while it runs (the clone is of this commit)
        stamp = time.strftime("%H%M%S")  # a later series never overwrites an earlier run's log (not committed)
        log = ROOT / "build" / "check-time" / f"{out.stem}-{args.kind}-{tested}-{stamp}-{index + 1}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        record = (fresh_run if args.kind == "fresh" else busy_run)(log)
        record = {"kind": args.kind, "commit": tested, "date": str(date.today()), "run": index + 1,
                  "machine": {k: machine[k] for k in ("cores", "cpu_model", "python")}, **record}
        with out.open("a") as stream:
            stream.write(json.dumps(record) + "\n")
        print(json.dumps(record), flush=True)
        worst = max(worst, record["rc"])
    print(summary(out))
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
