"""Tests of course_lib.lessons.horovod.widgets.ControlPanel, headless (no browser, no kernel).

One real 1-worker horovodrun launch of a script that prints the JSON lines of a 2-epoch run
(``scripts/json_hvd.py``: no TensorFlow, so no training to wait for; real Horovod training under
the launcher is tests/test_launch.py's, and the panel driving it in JupyterLab is
tests/browser/test_lab.py's) fills the records, the progress bar, the table and the plot; one
background run of a sleeping script is stopped and must leave no process behind.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import ipywidgets as w
import pytest
from procscan import processes_with

from course_lib.lessons.common import scaling
from course_lib.lessons.horovod.widgets import ControlPanel, default_script
from course_lib.runner.launch import LaunchError

SCRIPTS = Path(__file__).parent / "scripts"
needs_horovod = pytest.mark.requires("horovodrun")  # missing: a failure with the remedy (tests/conftest.py)




def two_cores(monkeypatch) -> None:
    """A fake machine of 2 cores and no GPU, whatever this one has (the panel's slots follow it)."""
    monkeypatch.delenv("COURSE_SLOTS", raising=False)
    monkeypatch.setattr("course_lib.training.machine.capacity.cpu_core_ids", lambda: (0, 1))
    monkeypatch.setattr("course_lib.training.machine.capacity.gpu_names", lambda: [])


@pytest.fixture
def private_slots(tmp_path, monkeypatch):
    """Slots of this test's own: a run here holds no machine-wide slot, so it never queues behind
    other test files' runs (json_hvd.py and sleep_hvd.py use next to no CPU: nothing to share)."""
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))


def log_text(panel: ControlPanel) -> str:
    return "".join(out.get("text", "") for out in panel.log.outputs)


def test_panel_builds_with_all_widgets(monkeypatch):
    two_cores(monkeypatch)
    panel = ControlPanel()
    assert panel.script == default_script()
    assert panel.script.parts[-2:] == ("source_code", "horovod_fmnist.py")
    for name, kind in [("workers", w.IntSlider), ("batch_size", w.IntSlider),
                       ("epochs", w.IntSlider), ("controller", w.Dropdown),
                       ("run_button", w.Button), ("stop_button", w.Button),
                       ("progress", w.IntProgress), ("log", w.Output), ("table", w.HTML),
                       ("plot", w.Output), ("widget", w.VBox)]:
        assert isinstance(getattr(panel, name), kind), name
    assert panel.workers.max == 4 and panel.controller.options == ("gloo", "mpi")
    assert panel.oversubscribe_note.value == ""
    panel.workers.value = 3
    assert "oversubscribed" in panel.oversubscribe_note.value
    assert panel.stop_button.disabled and not panel.running
    panel.stop()  # idle: a no-op


def test_panel_rejects_bad_settings_before_launching(tmp_path):
    panel = ControlPanel(tmp_path / "missing.py")
    with pytest.raises(LaunchError, match="script not found"):
        panel.run(workers=1)
    with pytest.raises(LaunchError, match="workers=0 must be a positive int"):
        panel.run(workers=0)
    with pytest.raises(LaunchError, match="controller='nccl'"):
        panel.run(controller="nccl")


@needs_horovod
@pytest.mark.horovod
def test_headless_run_fills_records_progress_table_and_plot(tmp_path, private_slots):
    records_path = tmp_path / "records.json"
    panel = ControlPanel(SCRIPTS / "json_hvd.py", records_path=records_path,
                         default_args=("--train-subset", "256"), timeout=240)
    events = []
    hook = panel._on_event
    panel._on_event = lambda event: (events.append(event), hook(event))
    result = panel.run(workers=1, batch_size=32, epochs=2, controller="gloo")
    assert result.returncode == 0 and result.result["workers"] == 1
    assert "--batch-size" in result.command and "--json" in result.command
    assert [e["epoch"] for e in events if e["event"] == "epoch"] == [1, 2]
    assert (panel.progress.value, panel.progress.max) == (2, 2)
    assert len(panel.records) == 1 and panel.records[0].devices == 1
    assert panel.records[0].images_per_sec == result.result["images_per_sec"]
    assert "<table" in panel.table.value and "speedup" in panel.table.value
    assert panel.figure is not None
    assert scaling.load_records(records_path) == panel.records  # persisted
    assert "done" in panel.status.value and not panel.run_button.disabled
    assert ControlPanel(SCRIPTS / "json_hvd.py", records_path=records_path).records == panel.records


@needs_horovod
@pytest.mark.horovod
def test_stop_ends_a_background_run_without_leftovers(private_slots):
    mark = f"test-{uuid.uuid4().hex}"
    panel = ControlPanel(SCRIPTS / "sleep_hvd.py", default_args=("--marker", mark), timeout=120)
    assert panel.run(workers=2, wait=False) is None
    assert panel.running and not panel.stop_button.disabled
    deadline = time.monotonic() + 90
    while "sleeping" not in log_text(panel) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling for start-up, not a timed assertion
    assert "sleeping" in log_text(panel)  # rank 0 is up, its line streamed into the panel
    assert len(processes_with(mark)) >= 3  # horovodrun and its ranks
    panel.stop()
    assert not panel.running
    assert processes_with(mark) == []
    assert panel.wait() is None and "stopped" in panel.status.value
    assert panel.records == [] and panel.stop_button.disabled


# -- efficiencies the panel may report (issue 15, point 4) --------------------------------------
def fake_result(workers: int, images_per_sec: float, warmups: list[bool]):
    from course_lib.runner.runlog import RunResult

    res = RunResult(command=["horovodrun"])
    for i, warm in enumerate(warmups):
        res.epochs.append({"event": "epoch", "epoch": i + 1, "warmup": warm})
    res.result = {"event": "result", "workers": workers, "per_worker_batch": 64,
                  "global_batch": 64 * workers, "images_per_sec": images_per_sec,
                  "images_per_sec_ci95": 1.0}
    res.returncode, res.duration_s = 0, 1.0
    return res


def test_warmup_only_runs_are_recognised():
    from course_lib.lessons.horovod.run_notes import warmup_only

    assert warmup_only(fake_result(1, 100.0, [True]))
    assert not warmup_only(fake_result(1, 100.0, [True, False]))
    assert not warmup_only(fake_result(1, 100.0, []))  # no epoch events: nothing to tell
    with_flag = fake_result(1, 100.0, [])
    with_flag.result["includes_warmup"] = True
    assert warmup_only(with_flag)


def test_one_epoch_runs_give_no_efficiency(monkeypatch, private_slots):
    """The panel's 1-epoch run is warm-up only: it must not reach the scaling table."""
    two_cores(monkeypatch)
    panel = ControlPanel(SCRIPTS / "sleep_hvd.py")
    runs = {1: fake_result(1, 100.0, [True]), 2: fake_result(2, 251.0, [True])}
    monkeypatch.setattr("course_lib.runner.launch.run_horovod",
                        lambda script, args, *, workers, **kw: runs[workers.workers])
    panel.run(workers=1, epochs=1)
    panel.run(workers=2, epochs=1)
    assert panel.records == []
    assert "not added to the scaling table: every epoch was warm-up" in panel.status.value
    assert "efficiency" not in panel.table.value and "speedup" not in panel.table.value


def test_super_linear_efficiency_is_flagged_with_its_likely_cause(monkeypatch, private_slots):
    from course_lib.lessons.horovod.run_notes import superlinear_notes

    two_cores(monkeypatch)
    panel = ControlPanel(SCRIPTS / "sleep_hvd.py")
    runs = {1: fake_result(1, 100.0, [True, False]), 2: fake_result(2, 260.0, [True, False])}
    monkeypatch.setattr("course_lib.runner.launch.run_horovod",
                        lambda script, args, *, workers, **kw: runs[workers.workers])
    panel.run(workers=1, epochs=2)
    panel.run(workers=2, epochs=2)
    assert len(panel.records) == 2
    assert "course-superlinear" in panel.table.value
    assert "super-linear efficiency 130%" in panel.table.value  # 260 / (2 x 100)
    assert "1-worker baseline ran slow" in panel.table.value
    table = scaling.scaling_table([runs[1], fake_result(2, 190.0, [False])])
    assert superlinear_notes(table) == []  # 95 %: below linear, nothing to flag
    noisy = table.assign(efficiency=[1.0, 1.05], efficiency_ci95=[0.0, 0.1])
    assert "cannot tell" in superlinear_notes(noisy)[0]


def test_the_panel_says_what_it_holds_where_no_widget_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A static page of notebook 03 (no widget state: the course site, a repository viewer) shows the bundle's
    text/html: the panel's controls in words, not 'VBox(children=...)'."""
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append((obj, raw)))
    ControlPanel().display()
    (bundle, raw), = shown
    assert raw and "application/vnd.jupyter.widget-view+json" in bundle
    assert "<b>Run</b>" in bundle["text/html"] and "only live" in bundle["text/html"]
