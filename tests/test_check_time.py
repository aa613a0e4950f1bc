"""tools/maintainers/check_time.py and tools/maintainers/suite_profile.py: the recorders of what the check costs (issue 31)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from nested_pytest import PYTEST_WITHOUT_NBVAL

from tools.maintainers import check_time, suite_profile


def test_timed_records_wall_cpu_status_and_setup_time(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    record = check_time.timed(["bash", "-c", "echo '[setup] done in 42 s'; echo '=== 3 passed in 1.0s ==='; "
                               "exit 3"], tmp_path, log)
    assert record["rc"] == 3 and record["setup_s"] == 42 and record["pytest_summaries"] == ["3 passed"]
    assert record["wall_s"] >= 0 and record["busy_cpu_s"] >= 0 and 0 <= record["utilisation"]
    assert "[setup] done in 42 s" in log.read_text()
    assert record["speed_probe_s"] > 0  # the machine's single-core speed just before the run


def test_the_speed_probe_times_its_fastest_round() -> None:
    from course_lib.environment.machine import speed_probe

    small, large = speed_probe(rounds=2, n=20_000), speed_probe(rounds=2, n=2_000_000)
    assert 0 < small < large


def test_summary_is_one_row_per_run(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    row = {"kind": "fresh", "commit": "abc1234", "rc": 0, "wall_s": 1100.0, "setup_s": 230,
           "busy_cpu_s": 1900.0, "busy_cores": 1.73, "utilisation": 0.86}
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "rc": 1, "speed_probe_s": 0.187}) + "\n")
    lines = check_time.summary(path).splitlines()
    assert len(lines) == 3 and "1100" in lines[1] and " 1 " in lines[2]
    assert lines[1].endswith("-") and lines[2].endswith("0.187")  # rows from before the probe show "-"


def test_bad_run_count_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        check_time.main(["fresh", "--runs", "0"])
    assert "--runs must be 1 or more" in capsys.readouterr().err


def test_profile_summary_groups_by_file(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    recs = [{"test": "notebooks/a.ipynb::Cell 0", "start": 0, "stop": 10, "busy_cpu_s": 20},
            {"test": "notebooks/a.ipynb::Cell 1", "start": 10, "stop": 20, "busy_cpu_s": 10},
            {"test": "tests/test_x.py::test_y", "start": 20, "stop": 25, "busy_cpu_s": 5}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    table = suite_profile.summarise(path)
    assert "notebooks/a.ipynb" in table.splitlines()[1] and " 1.50" in table.splitlines()[1]
    assert "first test start to last test stop: 25.0 s" in table
    assert suite_profile.busy_cpu_seconds() > 0


def test_each_run_asks_pytest_for_its_per_test_profile(tmp_path: Path) -> None:
    from tools.maintainers.check_time import profiled

    env = profiled({"PYTEST_ADDOPTS": "-x", "PATH": "/bin"}, tmp_path / "p.jsonl")
    assert env["PYTEST_ADDOPTS"] == "-x -p tools.maintainers.suite_profile"
    assert env["COURSE_SUITE_PROFILE"] == str(tmp_path / "p.jsonl") and env["PATH"] == "/bin"
    assert profiled({}, tmp_path / "p.jsonl")["PYTEST_ADDOPTS"] == "-p tools.maintainers.suite_profile"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_pytest_runs_that_tests_start_do_not_inherit_the_plugin(tmp_path: Path, workers: list[str]) -> None:
    """A scratch copy of the course has no benchmarks/: a nested pytest given the plugin would not start. Under
    pytest-xdist the workers profile the tests (the controller runs none) and strip the plugin themselves."""
    import os
    import subprocess

    probe = tmp_path / "test_probe.py"
    probe.write_text("import os\n\ndef test_env():\n    assert os.environ.get('PYTEST_ADDOPTS') == '-q', "
                     "os.environ.get('PYTEST_ADDOPTS')\n")
    env = {**os.environ, "PYTEST_ADDOPTS": "-q -p tools.maintainers.suite_profile",
           suite_profile.ENV: str(tmp_path / "p.jsonl"), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([*PYTEST_WITHOUT_NBVAL, "-s", *workers, str(probe)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
    (line,) = (tmp_path / "p.jsonl").read_text().splitlines()   # the session itself still profiles
    assert '"test": "test_probe.py::test_env"' in line and ('"worker": "gw' in line) == bool(workers), line


DRIVER = """
import json, sys
from pathlib import Path
from tools.maintainers import check_time
check_time.as_driver()
print(json.dumps(check_time.timed(["bash", "-c", sys.argv[1]], Path(sys.argv[2]), Path(sys.argv[2]) / "run.log",
                                  grace_s=(1.0, 1.0))), flush=True)
"""


def _marked(mark: str) -> list:
    """The run's marked processes (``bash -c trap ...``, ``bash -c sleep ...``), not the lines that start them."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if mark in line and line.startswith(("bash -c trap", "bash -c sleep")):
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except psutil.Error:
                continue
    return found


def _stubborn(mark: str) -> str:
    """A bash line that starts a process in a session of its own that ignores SIGINT and SIGTERM."""
    return f"setsid bash -c 'trap \"\" INT TERM; while :; do sleep 0.2; done; : {mark}' &"


@pytest.mark.slow
def test_a_process_that_outlives_the_run_is_counted_and_ended(tmp_path: Path) -> None:
    import subprocess
    import sys

    mark = f"check-time-leftover-{os.getpid()}-{time.time_ns()}"
    out = subprocess.run([sys.executable, "-c", DRIVER, f"{_stubborn(mark)} exit 0", str(tmp_path)],
                         cwd=check_time.ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record["rc"] == 0 and record["leftovers"] >= 1, record  # the stubborn bash (and its sleep)
    assert not _marked(mark), "the leftover outlived the driver"


@pytest.mark.slow
def test_sigint_to_the_driver_alone_ends_every_process_of_the_run(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    mark = f"check-time-interrupt-{os.getpid()}-{time.time_ns()}"
    line = f"{_stubborn(mark)} bash -c 'sleep 300; : {mark}' & echo started; wait"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, line, str(tmp_path)], cwd=check_time.ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(_marked(mark)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_marked(mark)) == 2, "the run's two processes never started"
        driver.send_signal(signal.SIGINT)  # to the driver alone, not to its run's session
        _, err = driver.communicate(timeout=60)
        assert driver.returncode != 0 and "KeyboardInterrupt" in err
        assert not _marked(mark), "a process of the run outlived the interrupted driver"
    finally:
        for proc in _marked(mark):
            proc.kill()
        driver.kill()


def test_own_cpu_counts_the_worker_and_its_children() -> None:
    """The profile's ``own_cpu_s`` comes from a cpuacct cgroup that the process's children join too; it is tried in
    a process of its own (this one may be a profiled worker, whose cgroup must stay), which removes its cgroup."""
    import subprocess
    import sys

    probe = """
import subprocess, sys
from tools.maintainers import suite_profile
before = suite_profile.own_cpu_seconds()
if before is None:
    print("none"); sys.exit()
subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: pass"])
group = suite_profile._OWN["group"]
print(round(suite_profile.own_cpu_seconds() - before, 2))
suite_profile.pytest_sessionfinish(None, 0)
print(group.exists())
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    if lines == ["none"]:  # no cpuacct controller to write here: the profile says so with None
        assert not (suite_profile.CPUACCT.is_dir() and os.access(suite_profile.CPUACCT, os.W_OK))
        return
    assert float(lines[0]) >= 0.45, f"the child's 0.5 CPU-s were not counted: {lines[0]}"
    assert lines[1] == "False", "the cgroup was left behind"
