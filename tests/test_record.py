"""``make record`` records a quiet run and refuses a disturbed one (tools/maintainers/run_notebooks.py --record; issue 44).

On tiny scratch notebooks (no TensorFlow) in a scratch course (tests/record_course.py), with a slot folder of the
course's own and a private machine (the recorder judges the CPU of this test's process tree, so the engineers'
work beside it on a shared machine decides nothing; a neighbour the test starts is in that tree), and the
recorder's DEFAULT limits unless a test says otherwise:

* a quiet run is recorded: its stamp completed, its entry in docs/run_times.json, the generated blocks written,
  every CPU-second of the notebook counted as its own (an orphaned grandchild's included), and the slot its own
  launch holds not taken for another run's;
* a busy neighbour (a spin loop), a second course run holding a slot (a real ``run_python`` launch), a cell that
  prints a slot-queue line and a notebook whose first output is not its stamp are each refused: exit status 3,
  one message saying why and what to do, the notebook's file and docs/run_times.json unchanged;
* a refusal that is certain while the notebook runs stops it early.

The fast unit tests check the pieces on planted cases: the limits, /proc/locks, the process tree's CPU.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_course import STAMP_CELL, env, make_course, outputs, record  # noqa: E402
from tool_modules import load_tool  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


record_watch = load_tool("record_watch")

BURN = "t = time.process_time()\nwhile time.process_time() - t < {s}: pass"
# The kernel burns 1 CPU-s, a child 1 CPU-s, and a grandchild whose parent exits at once (an orphan) 3 CPU-s,
# then writes its CPU time; the cell waits for it and prints the kernel's own total and the grandchild's.
OWN_WORK = f'''import os, subprocess, sys, time
import psutil
{BURN.format(s=1.0)}
subprocess.run([sys.executable, "-c", "import time\\n" + {BURN.format(s=1.0)!r}], check=True)
orphan = "import time\\n" + {BURN.format(s=3.0)!r} + "\\nopen('grandchild.txt', 'w').write(str(time.process_time()))"
subprocess.run([sys.executable, "-c", f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {{orphan!r}}])"],
               check=True)
while not os.path.exists("grandchild.txt") or not open("grandchild.txt").read():
    time.sleep(0.2)
time.sleep(1.5)   # the recorder samples (and reaps) the orphan's end
mine = psutil.Process().cpu_times()
print(f"kernel cpu {{mine.user + mine.system + mine.children_user + mine.children_system:.2f}} s; "
      f"grandchild cpu {{float(open('grandchild.txt').read()):.2f}} s")'''


# The notebook's own launch holds a slot (the kernel, then the run's watchdog, hold its lock): not another run's.
LAUNCH = "from course_lib.runner.launch import run_python\nprint(run_python('sleeper.py', workers=1).returncode)"


def _entry(root: Path, name: str) -> dict:
    return json.loads((root / "docs" / "run_times.json").read_text())["notebooks"][name]


def _refused(done: subprocess.CompletedProcess, root: Path, name: str, before: bytes, why: str) -> None:
    """Exit 3, one message naming the notebook, the reason and what to do; the file and the record unchanged."""
    assert done.returncode == 3, done.stdout[-3000:]
    assert f"REFUSED: {name}.ipynb was not recorded" in done.stdout and "What to do:" in done.stdout, done.stdout
    assert re.search(why, done.stdout), done.stdout[-3000:]
    assert (root / "notebooks" / f"{name}.ipynb").read_bytes() == before, "a refused notebook was written"
    assert not (root / "docs" / "run_times.json").exists(), "a refused notebook was recorded"


# ---- the pieces ----------------------------------------------------------------------------------------------

def test_the_limits_decide_at_their_thresholds() -> None:
    limits = record_watch.Limits()
    assert (limits.mean_cores, limits.window_cores, limits.window_s) == (0.10, 0.5, 20.0), \
        "the documented defaults (docs/recording.md, README) changed: change the docs with them"
    quiet = record_watch.Report(limits, seconds=100.0, others_cpu_s=10.0, others_max_window_cores=0.5)
    assert quiet.reasons() == []
    assert "on average" in " ".join(record_watch.Report(limits, seconds=100.0, others_cpu_s=10.1).reasons())
    assert "in any 20 s" in " ".join(record_watch.Report(limits, seconds=100.0, others_max_window_cores=0.51).reasons())
    slots = record_watch.Report(limits, seconds=1.0, foreign_holders=["ana (pid 1, x.py)"], queued=["pid 2"])
    assert len(slots.reasons()) == 2


def test_proc_locks_names_the_locked_slot_files_only(tmp_path: Path) -> None:
    for name in ("cpu-000.lock", "cpu-001.lock", "mutex.lock"):
        (tmp_path / name).write_text(json.dumps({"user": "ana", "pid": 4242, "script": "train.py", "workers": 2,
                                                 "started": time.time() - 35}))
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"fds = [open({str(tmp_path)!r} + '/' + n) for n in ('cpu-000.lock', 'mutex.lock')]\n"
                               "[fcntl.flock(f, fcntl.LOCK_EX) for f in fds]\nprint('locked', flush=True)\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        found = record_watch.locked_slot_files(tmp_path)
        assert found == {tmp_path / "cpu-000.lock": holder.pid}, found
        assert record_watch.describe_holder(tmp_path / "cpu-000.lock", holder.pid).startswith(
            "ana (pid 4242, train.py, 2 workers, running 3")
    finally:
        holder.kill()
        holder.wait()
    with open(tmp_path / "cpu-001.lock") as mine:
        fcntl.flock(mine, fcntl.LOCK_EX)
        assert list(record_watch.locked_slot_files(tmp_path)) == [tmp_path / "cpu-001.lock"]


def test_the_tree_counts_a_child_that_has_exited() -> None:
    before = record_watch.tree_cpu_seconds(os.getpid())
    subprocess.run([sys.executable, "-c", "import time\n" + BURN.format(s=0.5)], check=True)
    assert record_watch.tree_cpu_seconds(os.getpid()) - before >= 0.5


@pytest.mark.slow
def test_an_unknown_recording_is_not_continued(tmp_path: Path) -> None:
    root = make_course(tmp_path, {"00_tiny": [STAMP_CELL]})
    before = (root / "notebooks" / "00_tiny.ipynb").read_bytes()
    done = record(root, "--recording", "2026-01-01T00:00Z elsewhere", "00")
    assert done.returncode == 3 and "has no notebook of recording" in done.stdout, done.stdout
    assert "made on elsewhere" in done.stdout and "recording 00_tiny" not in done.stdout, done.stdout
    assert (root / "notebooks" / "00_tiny.ipynb").read_bytes() == before


# ---- whole recordings ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_quiet_run_is_recorded_and_stamped_and_its_own_cpu_is_its_own(tmp_path: Path) -> None:
    root = make_course(tmp_path, {"00_tiny": [STAMP_CELL, OWN_WORK, LAUNCH]})
    (root / "notebooks" / "sleeper.py").write_text("import time\ntime.sleep(3)\nprint('slept')\n")
    done = record(root, "00")
    assert done.returncode == 0, done.stdout[-3000:]
    stamp, work, *launched = outputs(root / "notebooks" / "00_tiny.ipynb")
    assert "slept" in "".join(launched), launched
    recording = re.search(r"^recording (\S+ \S+): 1 notebook", done.stdout, re.M)
    assert recording, done.stdout
    assert re.fullmatch(r"machine: .+, \d+ CPU cores?, .+; speed probe [\d.]+ s; Python .+; load [\d.]+ at start; "
                        rf"load [\d.]+ at end; recording {re.escape(recording.group(1))}\nhello\n", stamp), stamp
    entry = _entry(root, "00_tiny")
    assert entry["recording"] == recording.group(1) and entry["source"] == "make record"
    assert entry["limits"] == record_watch.Limits().describe()
    kernel, grandchild = map(float, re.findall(r"cpu ([\d.]+) s", work))
    assert grandchild >= 2.9
    # Everything the notebook burned is the recording's own (the orphan too: the recorder is its subreaper) ...
    assert entry["own_cpu_s"] >= kernel + grandchild - 0.1, (entry, work)
    # ... so none of it is the others' (the private machine holds nothing else).
    assert entry["others_cores_mean"] <= 0.10, entry
    readme = (root / "README.md").read_text()
    assert "| 00_tiny | about 5 min |" in readme and recording.group(1) in readme, readme
    intro = nbformat.read(root / "notebooks" / "00_tiny.ipynb", as_version=4).cells[0].source
    assert "Reading and doing: about 5 min" in intro and "Machine time to run every cell:" in intro, intro


@pytest.mark.slow
def test_a_busy_neighbour_is_refused(tmp_path: Path) -> None:
    root = make_course(tmp_path, {"00_tiny": [STAMP_CELL, "import time\ntime.sleep(5)"]})
    before = (root / "notebooks" / "00_tiny.ipynb").read_bytes()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        done = record(root, "00")
    finally:
        spinner.kill()
        spinner.wait()
    _refused(done, root, "00_tiny", before, r"other processes used [\d.]+ CPU cores .*\(limit 0\.10\)")
    assert 'make record NB="00"' in done.stdout, done.stdout


@pytest.mark.slow
def test_a_refusal_stops_the_notebook_early(tmp_path: Path) -> None:
    root = make_course(tmp_path, {"00_tiny": [STAMP_CELL, "import time\ntime.sleep(120)"]})
    before = (root / "notebooks" / "00_tiny.ipynb").read_bytes()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    start = time.monotonic()
    try:
        done = record(root, "--others-window", "0.05", "--window-s", "3", "00")
    finally:
        spinner.kill()
        spinner.wait()
    assert "stopping the notebook" in done.stdout, done.stdout
    assert time.monotonic() - start < 90, "the refused notebook ran its 120 s sleep to the end"
    _refused(done, root, "00_tiny", before, r"in any 3 s")


@pytest.mark.slow
def test_a_second_course_run_holding_a_slot_is_refused(tmp_path: Path) -> None:
    root = make_course(tmp_path, {"00_tiny": [STAMP_CELL]})
    (root / "sleeper.py").write_text("import time\ntime.sleep(300)\n")
    before = (root / "notebooks" / "00_tiny.ipynb").read_bytes()
    other = subprocess.Popen([sys.executable, "-c", "from course_lib.runner.launch import run_python\n"
                              "run_python('sleeper.py', workers=1, timeout=300)"], cwd=root, env=env(root),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not record_watch.locked_slot_files(root / "slots") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert record_watch.locked_slot_files(root / "slots"), "the second run never took its slot"
        done = record(root, "00")
    finally:
        for proc in [other, *psutil.Process(other.pid).children(recursive=True)]:
            try:
                proc.kill()
            except psutil.Error:
                pass
        other.wait()
    _refused(done, root, "00_tiny", before, r"another course run held a slot: \S+ \(pid \d+, sleeper\.py, 1 worker")
    assert "wait for other course runs to end" in done.stdout


@pytest.mark.slow
def test_a_printed_queue_line_is_refused(tmp_path: Path) -> None:
    root = make_course(tmp_path, {"00_tiny": [STAMP_CELL, "print('waiting for 2 of 2 slots: position 1 in line; "
                                                           "held by ana (pid 1, x.py, 2 workers, running 5 s, core 0)')"]})
    before = (root / "notebooks" / "00_tiny.ipynb").read_bytes()
    _refused(record(root, "00"), root, "00_tiny", before, r"a cell printed a slot-queue line: 'waiting for 2 of 2")


@pytest.mark.slow
def test_a_notebook_without_its_stamp_first_is_refused(tmp_path: Path) -> None:
    root = make_course(tmp_path, {"00_tiny": ["print('hello first')\n" + STAMP_CELL]})
    before = (root / "notebooks" / "00_tiny.ipynb").read_bytes()
    done = record(root, "00")
    _refused(done, root, "00_tiny", before, r"its first output line is not the machine: stamp \(got stdout: 'hello first'\)")
    assert "print(stamp())" in done.stdout
