"""Tests of course_lib.runner.launch / processes / runlog: parsing, bad input, and real horovodrun runs.

The integration tests launch real ``horovodrun -np 2`` (Gloo and MPI) on the CPU with the tiny
scripts in tests/scripts/, and after every failure, timeout, stop or interrupt they check that
no process of the run is left, by two independent means: the pids the launcher recorded, and a
scan of all processes for a marker argument unique to the test.
"""

from __future__ import annotations

import hashlib
import os
import sys
import signal
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from course_lib.runner import launch, launchers
from course_lib.runner.launch import (
    Horovodrun, LaunchError, RunFailedError, RunStoppedError, RunTimeoutError, run_horovod, run_python)
from course_lib.runner.procs import processes
from course_lib.runner.procs.processes import ProcessSpec, stream_command
from course_lib.runner.run import RunOptions
from course_lib.runner.runlog import RunResult, parse_line

SCRIPTS = Path(__file__).parent / "scripts"
JSON, CRASH, SLEEP = SCRIPTS / "json_hvd.py", SCRIPTS / "crash_hvd.py", SCRIPTS / "sleep_hvd.py"
ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}

needs_horovod = pytest.mark.requires("horovodrun")  # missing: a failure with the remedy (tests/conftest.py)


@pytest.fixture(autouse=True)
def private_slots(tmp_path, monkeypatch):
    """Machine-wide slots in a folder of this test's own: other users of the machine do not count."""
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.delenv("COURSE_SLOTS", raising=False)


def marker() -> str:
    return f"test-{uuid.uuid4().hex}"


def processes_with(mark: str) -> list[str]:
    """Live processes whose command line contains ``mark`` (zombies excluded)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                    mark in arg for arg in proc.info["cmdline"] or ()):
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'])}")
        except psutil.Error:
            continue
    return found


def assert_nothing_left(mark: str, result: RunResult | None = None) -> None:
    assert processes_with(mark) == []
    if result is not None:
        assert len(result.pids) >= 3  # horovodrun and at least the two ranks were seen
        assert alive_pids(result.pids) == []


# -- parsing ------------------------------------------------------------------------------------
def test_mpirun_pieces_cut_by_another_rank_are_joined_again():
    """An unbuffered rank writes a line and its newline separately; mpirun --tag-output can put
    another rank's line between them (seen in notebook 06: two JSON events on one line)."""
    from course_lib.runner.runlog import TagJoiner

    joiner = TagJoiner()
    assert joiner.feed('[1,0]<stdout>:{"event": "a"}[1,1]<stdout>:{"event": "b"}') == [
        '[1,1]<stdout>:{"event": "b"}']
    assert joiner.feed("[1,0]<stdout>:") == ['[1,0]<stdout>:{"event": "a"}']
    assert joiner.feed("[1,1]<stdout>:as it was") == ["[1,1]<stdout>:as it was"]
    assert joiner.feed("[1]<stdout>:gloo lines are whole") == ["[1]<stdout>:gloo lines are whole"]
    assert joiner.feed("[1,0]<stderr>:x[1,1]<stdout>:y") == ["[1,1]<stdout>:y"]
    assert joiner.flush() == ["[1,0]<stderr>:x"] and joiner.flush() == []
    rank, _, _, event = parse_line('[1,0]<stdout>:{"event": "a"}', horovod=True)
    assert (rank, event) == (0, {"event": "a"})


def test_a_line_that_lands_inside_a_pseudo_terminal_ranks_line_is_cut_out_again():
    """Seen in notebook 06's two-host run (CI, stop 36): rank 1 is behind ssh -tt, so horovodrun
    writes its line's "\\r" and "\\n" separately, and rank 0's epoch line landed between them; read
    as one line it was rank 1's, and rank 0's "epoch 3" line was not shown."""
    from course_lib.runner.runlog import split_interleaved

    seen = '[1]<stdout>:{"event": "epoch", "epoch": 3}\r[0]<stdout>:epoch 3: 1024 images in 0.7 s'
    pieces = split_interleaved(seen)
    assert pieces == ['[1]<stdout>:{"event": "epoch", "epoch": 3}\r', "[0]<stdout>:epoch 3: 1024 images in 0.7 s"]
    assert [parse_line(p)[:3] for p in pieces] == [(1, "stdout", '{"event": "epoch", "epoch": 3}'),
                                                   (0, "stdout", "epoch 3: 1024 images in 0.7 s")]
    # the same rank after a "\r" stays on its line: a progress bar, or the pseudo-terminal's repeat
    bar = "[1]<stdout>:  1/9 [..]\r[1]<stdout>:  9/9 [==]\r[1]<stdout>:"
    assert split_interleaved(bar) == [bar]
    assert split_interleaved("[1]<stdout>:a\r[1]<stderr>:b") == ["[1]<stdout>:a\r", "[1]<stderr>:b"]
    timed = "Sat Nov 21 06:32:09 2026[1]<stdout>:a\rSat Nov 21 06:32:09 2026[0]<stdout>:b"
    assert [parse_line(p)[:3] for p in split_interleaved(timed)] == [(1, "stdout", "a"), (0, "stdout", "b")]
    assert split_interleaved("plain\r[0]<stdout>:x") == ["plain\r[0]<stdout>:x"]  # horovodrun's own line


def test_the_launcher_shows_and_records_a_line_that_landed_inside_another_ranks_line():
    import sys as _sys

    from course_lib.runner.run import execute

    text = '[1]<stdout>:{"event": "epoch", "epoch": 3}\r[0]<stdout>:epoch 3: shown\n[1]<stdout>:\n'
    shown: list[str] = []
    result = execute((_sys.executable, "-c", f"import sys; sys.stdout.write({text!r})"),
                     RunOptions(python=_sys.executable, output=shown.append, timeout=30))
    assert "epoch 3: shown" in shown  # rank 0's line, shown with show="rank0"
    assert result.lines_for_rank(0) == ["epoch 3: shown"]
    assert [event for _, event in result.events] == [{"event": "epoch", "epoch": 3}]


def test_parse_gloo_mpi_and_plain_lines():
    assert parse_line("[1]<stderr>:boom") == (1, "stderr", "boom", None)
    assert parse_line("[1,0]<stdout>:hi")[:3] == (0, "stdout", "hi")
    assert parse_line("Sat Nov 21 06:32:09 2026[3]<stdout>:x")[:3] == (3, "stdout", "x")
    assert parse_line("[1,1]<stderr>:hello err[1,1]<stderr>:")[2] == "hello err"
    assert parse_line("Checking connectivity")[0] is None
    assert parse_line('{"event": "epoch"}')[0] is None  # horovodrun's own: never an event
    assert parse_line("[0]<stdout>:  1/9 [..]\r  9/9 [==]")[2] == "  9/9 [==]"
    # ssh -tt (a pseudo-terminal) ends lines with "\r\n": the trailing "\r" is not an overwrite.
    assert parse_line("[1]<stdout>:done\r")[2] == "done"
    # ... and horovodrun repeats the prefix after that "\r" (seen with two ssh hosts, tools/localcluster):
    seen = '[1]<stdout>:{"event": "digest", "rank": 1, "digest": "0f"}\r[1]<stdout>:'
    assert parse_line(seen)[3] == {"event": "digest", "rank": 1, "digest": "0f"}
    assert parse_line("[1]<stdout>:  1/9 [..]\r[1]<stdout>:  9/9 [==]\r[1]<stdout>:")[2] == "  9/9 [==]"
    assert parse_line('[1]<stdout>:{"event": "digest", "digest": "ab"}\r')[3] == {"event": "digest", "digest": "ab"}
    assert parse_line("[0]<stdout>:  1/9 [..]\r  9/9 [==]\r")[2] == "  9/9 [==]"
    rank, _, _, event = parse_line('[0]<stdout>:{"event": "epoch", "epoch": 1}')
    assert (rank, event) == (0, {"event": "epoch", "epoch": 1})
    assert parse_line('[0]<stdout>:{"epoch": 1}')[3] is None  # no "event" key
    assert parse_line('{"event": "result", "workers": 1}', horovod=False)[3]["workers"] == 1


def test_run_result_collects_events_and_blames_first_traceback():
    res = RunResult(command=["x"])
    lines = ['[0]<stdout>:{"event": "config", "epochs": 1}',
             '[1]<stdout>:{"event": "epoch", "epoch": 1}',  # rank 1: ignored for epochs
             '[0]<stdout>:{"event": "epoch", "epoch": 1}',
             '[0]<stdout>:{"event": "digest", "rank": 0, "digest": "ab"}',
             '[1]<stdout>:{"event": "digest", "rank": 1, "digest": "ab"}',
             "[1]<stderr>:Traceback (most recent call last):",
             "[1]<stderr>:RuntimeError: boom",
             "[0]<stderr>:Traceback (most recent call last):",
             "Process 0 exit with status code 1."]
    for line in lines:
        res.add_line(line, *parse_line(line))
    assert res.config == {"event": "config", "epochs": 1}
    assert res.epochs == [{"event": "epoch", "epoch": 1}]
    assert res.digests == {0: "ab", 1: "ab"}
    assert res.failure_tail(1) == (1, "RuntimeError: boom")
    assert res.lines_for_rank(None) == ["Process 0 exit with status code 1."]
    from course_lib.lessons.common import scaling

    with pytest.raises(ValueError, match="--json"):
        scaling.to_record(res)


@pytest.mark.parametrize("lines, rank", [
    # rank 0's echo of rank 1's failure reaches the log first: rank 1 is still blamed
    (["[0]<stderr>:Traceback (most recent call last):",
      "[0]<stderr>:UnknownError: Horovod has been shut down. This was caused by ...",
      "[1]<stderr>:Traceback (most recent call last):", "[1]<stderr>:RuntimeError: x"], 1),
    (["[1,0]<stderr>:killed", "  Process name: [[23552,1],1]"], 1),  # mpirun names it
    (["[0]<stderr>:oops", "Process name: 0"], 0),  # horovodrun (Gloo) names it
    (["[0]<stdout>:fine", "Segmentation fault"], None),
])
def test_failed_rank(lines, rank):
    res = RunResult(command=["x"])
    for line in lines:
        res.add_line(line, *parse_line(line))
    assert res.failed_rank() == rank


def test_stream_command_uses_the_injected_clock_for_the_timeout():
    got: list[str] = []
    code = "import time; print('up', flush=True); time.sleep(60)"
    # time stands still until the first line arrived, then jumps past the timeout
    launch = ProcessSpec((sys.executable, "-c", code), timeout=50,
                         clock=lambda: 100.0 if got else 0.0, grace_s=(1.0, 1.0))
    outcome = stream_command(launch, lambda line, stream: got.append(line))
    assert outcome.reason == "timeout" and got[0] == "up"  # then its SIGINT traceback
    assert outcome.duration_s == 100.0
    assert alive_pids(outcome.pids) == []


def alive_pids(pids: list[int]) -> list[int]:
    """Those of ``pids`` that belong to a live (non-zombie) process."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


# -- bad input: one clear error each, before anything is launched --------------------------------
@pytest.mark.parametrize("kwargs, message", [
    ({"workers": 0}, "workers=0 must be a positive int"),
    ({"workers": True}, "workers=True must be a positive int"),
    ({"workers": 2.0}, "workers=2.0 must be a positive int"),
    ({"script_args": ["--epochs", 2]}, r"script_args\[1\] = 2 is a int, not a str"),
    ({"script_args": "--json"}, "sequence of strings, not one string"),
    ({"horovodrun": Horovodrun(hosts="localhost")}, "'localhost' in 'localhost' is malformed"),
    ({"horovodrun": Horovodrun(hosts="a:2,b:0")}, "'b:0' in 'a:2,b:0' is malformed"),
    ({"horovodrun": Horovodrun(hosts="a:x")}, "slots a positive integer"),
    ({"horovodrun": Horovodrun(hosts="localhost:1")}, "exceeds the 1 slots of hosts='localhost:1'"),
    ({"horovodrun": Horovodrun(controller="nccl")}, "controller='nccl' must be 'gloo', 'mpi' or None"),
    ({"show": "rank1"}, "show='rank1' must be one of"),
    ({"timeout": 0}, "timeout=0 must be a positive number"),
    ({"output": 42}, "output=42 must be None"),
    ({"horovodrun": Horovodrun(extra_args=[1])}, r"extra_horovodrun_args\[0\] = 1 is a int"),
    ({"env": {"A": 1}}, r"env\['A'\] = 1 is a int, not a str; .*env=\{'A': '1'\}"),
    ({"env": {"A=B": "1"}}, "bad variable name 'A=B'"),
    ({"env": ["A"]}, "must be a dict of environment variables"),
])
def test_bad_input_is_rejected_with_a_clear_message(kwargs, message, monkeypatch):
    def must_not_start(*args, **kwargs):
        raise AssertionError("a process was started despite bad input")

    monkeypatch.setattr(processes, "stream_command", must_not_start)
    monkeypatch.setattr("course_lib.training.machine.capacity.cpu_core_ids", lambda: (0, 1, 2, 3))
    call = {"script": SLEEP, "workers": 2, **kwargs}
    with pytest.raises(LaunchError, match=message):
        run_horovod(**call)


def test_missing_script_shows_its_path(tmp_path):
    with pytest.raises(LaunchError, match=f"script not found: {tmp_path / 'nope.py'}"):
        run_horovod("nope.py", workers=1, cwd=tmp_path)
    with pytest.raises(LaunchError, match="script not found"):
        run_python(tmp_path / "nope.py")


def test_a_folder_given_as_script_is_named_a_folder(tmp_path):
    with pytest.raises(LaunchError, match=f"script {tmp_path} is a folder, not a Python file"):
        run_horovod(tmp_path, workers=1)
    with pytest.raises(LaunchError, match="is a folder"):
        run_python(".", cwd=tmp_path)
    with pytest.raises(LaunchError, match=r"env\['A'\] = 1 is a int"):
        run_python(SLEEP, env={"A": 1})


def test_too_many_workers_says_how_to_oversubscribe(monkeypatch):
    monkeypatch.setattr("course_lib.training.machine.capacity.cpu_core_ids", lambda: (0, 1))
    monkeypatch.setattr("course_lib.runner.slots.gpu_count", lambda: 0)
    with pytest.raises(LaunchError, match=r"exceeds the 2 slots of this machine \(2 CPU cores \(0, 1\)\)"
                                          ".*pass oversubscribe=True"):
        run_horovod(SLEEP, workers=3)


def test_missing_horovodrun_says_how_to_install(tmp_path, monkeypatch):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(fake_bin / "python"))
    monkeypatch.setenv("PATH", str(fake_bin))
    with pytest.raises(LaunchError, match="horovodrun was not found.*make setup.*"
                                          "HOROVOD_WITH_TENSORFLOW=1"):
        run_horovod(SLEEP, workers=1, python=str(fake_bin / "python"))


def test_mpi_without_mpirun_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setattr(launchers, "find_horovodrun", lambda python: "/usr/bin/horovodrun")
    with pytest.raises(LaunchError, match="controller='mpi' needs Open MPI's mpirun"):
        run_horovod(SLEEP, workers=1, horovodrun=Horovodrun(controller="mpi"), env={"PATH": str(tmp_path)})


def test_command_is_an_argument_list():
    cmd = launch.build_horovod_command("/v/horovodrun", 2, ["/v/python", "/s.py", "--a", "b c"],
                                       "h1:1,h2:1", "mpi", ["--verbose"])
    assert cmd == ["/v/horovodrun", "-np", "2", "--mpi", "-H", "h1:1,h2:1", "--verbose",
                   "/v/python", "/s.py", "--a", "b c"]


# -- run_python (cheap: no TensorFlow) -----------------------------------------------------------
def test_run_python_streams_collects_and_reports_failure(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import json, sys\n"
                      "print(json.dumps({'event': 'result', 'workers': 1}))\n"
                      "print('to stderr', file=sys.stderr)\n"
                      "sys.exit(int(sys.argv[1]))\n")
    seen: list[str] = []
    res = run_python(script, ["0"], output=seen.append)
    assert res.returncode == 0 and res.result == {"event": "result", "workers": 1}
    assert sorted(seen) == sorted(['{"event": "result", "workers": 1}', "to stderr"])
    with pytest.raises(RunFailedError, match="python exited with status 2") as info:
        run_python(script, ["2"], output=seen.append)
    assert info.value.returncode == 2 and "to stderr" in info.value.tail
    assert run_python(script, ["2"], output=seen.append, check=False).returncode == 2


# -- real horovodrun runs ------------------------------------------------------------------------
@needs_horovod
@pytest.mark.horovod
def test_gloo_run_streams_live_and_collects_records(tmp_path):
    """A real ``horovodrun --gloo`` launch of json_hvd.py (no TensorFlow; issue 31: was a training script, about
    25 CPU-s more): lines stream while the run goes on, each rank's records reach its rank. Real training to
    identical weights through ``run_horovod`` is notebook 03's, under strict nbval."""
    go, mark = tmp_path / "go", marker()
    shown: list[tuple[float, str]] = []
    events: list[dict] = []

    def on_line(line: str) -> None:
        shown.append((time.monotonic(), line))
        if '"event": "config"' in line:
            go.touch()  # the ranks wait for this file: the run cannot end unless lines stream

    res = run_horovod(JSON, ["--epochs", "2", "--batch-size", "16", "--train-subset", "256",
                             "--json", "--wait-for", str(go), "--marker", mark], workers=2,
                      output=on_line, on_event=events.append, env=ENV, timeout=240)
    ended = time.monotonic()
    assert res.returncode == 0
    assert res.config["workers"] == 2 and res.config["global_batch"] == 32
    assert [e["epoch"] for e in res.epochs] == [1, 2]
    assert res.result["workers"] == 2 and res.result["images_per_sec"] > 0
    assert res.digests == {rank: hashlib.sha256(f"json_hvd rank {rank}".encode()).hexdigest() for rank in (0, 1)}
    assert [e["event"] for e in events if e["event"] != "digest"] == [
        "config", "epoch", "epoch", "result"]
    config_at = next(t for t, line in shown if '"event": "config"' in line)
    assert config_at < ended
    shown_lines = [line for _, line in shown]
    assert any('"rank": 0' in line for line in shown_lines)  # rank 0's digest, prefix removed
    assert not any('"rank": 1' in line or line.startswith("[") for line in shown_lines)
    assert any(line.startswith('[1]<stdout>:{"event": "digest"') for line in res.log)
    assert_nothing_left(mark)


# A whole MPI run (``controller="mpi"``: horovodrun --mpi) that trains to identical digests on both ranks,
# collects rank 1's tagged lines and leaves nothing running is tests/test_ssh_hosts.py's
# test_two_hosts_train_to_the_same_digest[mpi] (the same run_horovod call, its two ranks on two ssh hosts);
# the MPI launch on this machine is ended by test_sigint_during_an_mpi_run_cleans_up_and_propagates below.


@needs_horovod
@pytest.mark.horovod
def test_crashing_rank_is_named_with_its_traceback():
    mark = marker()
    with pytest.raises(RunFailedError, match="rank 1 failed") as info:
        run_horovod(CRASH, ["--marker", mark], workers=2, output=lambda line: None, env=ENV,
                    timeout=240)
    err = info.value
    assert err.rank == 1 and err.returncode != 0
    assert "RuntimeError: rank 1 fails on purpose at step 1" in str(err)
    assert "fail_deep_inside" in err.tail and "Traceback" in err.tail
    assert err.result.result is None and err.result.epochs == []  # any script works
    assert_nothing_left(mark, err.result)


@needs_horovod
@pytest.mark.horovod
def test_timeout_kills_even_ranks_that_ignore_sigint_and_sigterm():
    mark, up = marker(), []

    def on_line(line: str) -> None:
        up.extend(["rank"] if "sleeping" in line else [])

    def clock() -> float:  # time stands still until both ranks are up, then jumps 1000 s
        return 1000.0 if len(up) == 2 else 0.0

    with pytest.raises(RunTimeoutError, match="exceeded timeout=5 s") as info:
        run_horovod(SLEEP, ["--stubborn", "--marker", mark], workers=2, timeout=5, show="all",
                    output=on_line, grace_s=(1.0, 1.0), clock=clock)
    assert sum("sleeping" in line for line in info.value.result.log) == 2
    assert_nothing_left(mark, info.value.result)


@needs_horovod
@pytest.mark.horovod
def test_interrupt_from_the_output_callback_cleans_up_and_propagates():
    mark = marker()

    def on_line(line: str) -> None:
        if "sleeping" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_horovod(SLEEP, ["--marker", mark], workers=2, output=on_line, show="all", timeout=120)
    assert_nothing_left(mark)


@needs_horovod
@pytest.mark.horovod
def test_sigint_during_an_mpi_run_cleans_up_and_propagates():
    # Jupyter's Interrupt sends the kernel a real SIGINT, which also wakes a blocking system call
    # (a lock, a wait); _thread.interrupt_main only sets Python's flag, and once hung this test
    # for its 120 s timeout in a full run. Python's own handler must be in place to raise
    # KeyboardInterrupt: a test that leaves another handler behind would break it, so say so.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, \
        f"an earlier test left SIGINT handled by {signal.getsignal(signal.SIGINT)!r}"
    mark = marker()
    started = threading.Event()

    def on_line(line: str) -> None:
        if "sleeping" in line and not started.is_set():
            started.set()
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()  # as Jupyter does

    with pytest.raises(KeyboardInterrupt):
        run_horovod(SLEEP, ["--marker", mark], workers=2, horovodrun=Horovodrun(controller="mpi"),
                    output=on_line, show="all", timeout=120)
    assert started.is_set()
    assert_nothing_left(mark)


@needs_horovod
@pytest.mark.horovod
def test_stop_event_from_another_thread():
    mark, stop = marker(), threading.Event()

    def on_line(line: str) -> None:
        if "sleeping" in line:
            threading.Timer(0.2, stop.set).start()

    with pytest.raises(RunStoppedError, match="stopped on request") as info:
        run_horovod(SLEEP, ["--marker", mark], workers=2, output=on_line, stop_event=stop, timeout=120)
    assert_nothing_left(mark, info.value.result)


def test_stderr_lines_are_shown_on_stderr(tmp_path, capsys) -> None:
    script = tmp_path / "two_streams.py"
    script.write_text("import sys\nprint('to stdout', flush=True)\nprint('to stderr', file=sys.stderr, flush=True)\n")
    result = launch.run_python(script, timeout=60)
    captured = capsys.readouterr()
    assert "to stdout" in captured.out and "to stderr" not in captured.out
    assert "to stderr" in captured.err
    assert any("to stderr" in line for line in result.log)


def test_every_launcher_takes_the_same_options_and_refuses_a_misspelt_one(monkeypatch):
    """The shared keywords are declared once (course_lib.runner.run.RunOptions), every launcher checks them the same
    way, and a misspelt one is refused before anything starts (no ``**kwargs`` to hide it)."""
    from course_lib.runner import multiworker
    from course_lib.runner.run import OPTION_NAMES

    def must_not_start(*args, **kwargs):
        raise AssertionError("a process was started despite bad input")

    monkeypatch.setattr(processes, "stream_command", must_not_start)
    calls = [lambda **kw: run_horovod(SLEEP, workers=1, **kw), lambda **kw: run_python(SLEEP, **kw),
             lambda **kw: multiworker.run_mpirun(SLEEP, **kw),
             lambda **kw: multiworker.run_elastic(SLEEP, **kw),
             lambda **kw: multiworker.run_workers(SLEEP, workers=1, worker_envs=[{}], timeout=5, **kw),
             lambda **kw: multiworker.run_multiworker(SLEEP, **kw)]
    for call in calls:
        with pytest.raises(TypeError, match="unexpected keyword argument 'timout'"):
            call(timout=5)
        with pytest.raises(LaunchError, match="show='some'"):
            call(show="some")
    assert {"timeout", "env", "output", "wait_for_slots"} <= set(OPTION_NAMES)


def test_the_public_launchers_have_one_signature():
    """run_<launcher>(script, script_args=(), *, workers: WorkerPlan | int, <the shared options>, <at most one option
    of its own>): the same parameters, kinds and annotations on every front door (issue 54)."""
    import inspect

    from course_lib.runner import multiworker, torchrun
    from course_lib.runner.run import OPTION_NAMES, RunOptions

    launchers_ = [launch.run_horovod, launch.run_python, multiworker.run_elastic, multiworker.run_workers,
                  multiworker.run_multiworker, multiworker.run_mpirun, torchrun.run_torchrun]
    shared = ["script", "script_args", "workers", *OPTION_NAMES]
    reference = inspect.signature(launch.run_horovod).parameters
    for function in launchers_:
        parameters = inspect.signature(function).parameters
        names = list(parameters)
        assert names[:len(shared)] == shared, function.__name__
        own = names[len(shared):]
        assert len(own) <= 1, (function.__name__, own)  # at most one option of its own
        for name in shared:
            mine, theirs = parameters[name], reference[name]
            assert (mine.kind, mine.annotation) == (theirs.kind, theirs.annotation), (function.__name__, name)
        assert parameters["workers"].annotation == "WorkerPlan | int"
        assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in names[2:])
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        for name in own:
            assert parameters[name].annotation not in ("", inspect.Parameter.empty), (function.__name__, name)
    # the shared options carry the same annotations as RunOptions declares them
    for name in OPTION_NAMES:
        assert reference[name].annotation == RunOptions.__dataclass_fields__[name].type, name


def test_a_failed_rank_is_named_with_its_host():
    from course_lib.runner.launch import name_failed_host
    result = RunResult(command=[])
    result.log = ["Process 1 exit with status code 255."]
    message = name_failed_host("horovodrun exited with status 1: rank 1 failed. Last lines", 1, "hostA:1,hostB:1",
                               result)
    assert message.startswith("horovodrun exited with status 1: rank 1 (on hostB) failed.")
    assert "status 255, ssh's own status for a lost connection: hostB went down" in message
    assert "rank 2 (on b) failed" in name_failed_host("rank 2 failed", 2, "a:2,b:1", None)
    local = name_failed_host("rank 1 failed", 1, "localhost:2", result)  # no ssh on this machine
    assert local == "rank 1 (on localhost) failed"
    assert name_failed_host("rank 5 failed", 5, "a:1", None) == "rank 5 failed"



def test_run_result_shows_its_command_as_one_line_the_same_on_every_machine():
    """03 prints the horovodrun line of each launch: absolute paths (the venv's python) shortened to their names,
    the relative script path and every argument kept as they ran."""
    result = RunResult(command=["/opt/venv/bin/python", "-m", "course_lib.runner.horovodrun", "-np", "2", "--gloo",
                                "/opt/venv/bin/python", "../source_code/horovod_fmnist.py", "--epochs", "5"])
    assert result.command_line() == ("python -m course_lib.runner.horovodrun -np 2 --gloo python "
                                     "../source_code/horovod_fmnist.py --epochs 5")
