"""The course as learners meet it: JupyterLab (``make lab``) in a real browser, headless Chromium.

The lab serves the learner edition (``make student``; the ``lab`` fixture of conftest.py), importing its
``course_lib``: the tree a learner is given, run as they run it.

1. ``00_setup``: Run ▸ Run All Cells; every code cell ran, no traceback, the doctor says ready (so the learner
   tree's own ``course_lib`` finds what it checks inside that tree); the lab's file browser (the page's left
   panel) lists the notebooks.
2. ``03_horovod``: only the Setup cells and the control-panel cell run; the panel is used with
   the mouse and keyboard: a 2-worker run (live log, progress bar advancing), a 1-worker baseline
   so the results table can show speed-up, then a run stopped with the Stop button, after which
   no horovodrun or rank process is left.
3. The lab stops leaving nothing running: kernels shut down, the server's process group gone.

Screenshots go to ``artifacts/browser/`` (not committed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import labdriver
from labdriver import POLL_MS, NotebookPage, is_png, marked_processes

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN_TIMEOUT_MS = 300_000  # one tiny Horovod run; generous for a loaded 2-core CI machine


# -- 00_setup ---------------------------------------------------------------------------------------
def test_setup_notebook_runs_all_cells_in_the_lab(open_notebook, lab) -> None:
    if lab.course_root != labdriver.ROOT:  # the learner edition: its kernels import its course_lib
        where = subprocess.run([sys.executable, "-c", "import course_lib; print(course_lib.__file__)"],
                               env=lab.env, cwd=lab.notebook_dir, capture_output=True, text=True, timeout=60)
        assert where.stdout.strip().startswith(str(lab.course_root)), where.stdout + where.stderr
    nb = open_notebook("00_setup.ipynb")
    with nb.step("Edit ▸ Clear Outputs of All Cells"):
        nb.clear_all_outputs()
    with nb.step("Run ▸ Run All Cells and wait until the kernel is idle"):
        nb.run_all(timeout_ms=RUN_TIMEOUT_MS)
    shot = nb.screenshot("after-run-all")
    with nb.step("check the outputs: no traceback, every code cell ran, the doctor's verdict"):
        errors = nb.error_outputs()
        assert not errors, "a cell failed in the lab:\n" + "\n---\n".join(e[-3000:] for e in errors)
        prompts = nb.prompts()
        assert prompts and all(labdriver.PROMPT_NUMBER.match(p) for p in prompts), \
            f"not every code cell ran: prompts {prompts}"
        assert "Verdict: ready for the course." in nb.output_text(), \
            "the doctor's report does not say 'Verdict: ready for the course.':\n" + nb.output_text()[-3000:]
    assert is_png(shot), f"screenshot not written: {shot}"
    with nb.step("the lab's file browser lists the course notebooks"):
        nb.page.locator(".jp-DirListing-item", has_text="00_setup.ipynb").wait_for(timeout=60_000)
        assert nb.page.locator(".jp-DirListing-item", has_text="03_horovod.ipynb").count() == 1
        listing = nb.screenshot("lab-file-browser")
    assert is_png(listing), f"screenshot not written: {listing}"


# -- 03_horovod: the control panel ------------------------------------------------------------------
class Panel:
    """The ``course_lib.lessons.horovod.widgets.ControlPanel`` of one cell, found in the DOM by its widgets' labels."""

    def __init__(self, nb: NotebookPage, cell_index: int) -> None:
        page = nb.page
        self.root = nb.cell(cell_index).locator(".jp-Cell-outputArea .widget-vbox").first
        self.label = lambda text: page.locator("label.widget-label",
                                               has_text=re.compile(rf"^{re.escape(text)}$"))
        self.run_button = self.root.locator("button.widget-button[title='Run']")
        self.stop_button = self.root.locator("button.widget-button[title='Stop']")
        self.status = self.root.locator(".widget-hbox").filter(
            has=page.locator("button.widget-button[title='Run']")).locator(".widget-html-content")
        self.progress_label = self.root.locator(".widget-hprogress label.widget-label")
        self.log_lines = self.root.locator(":scope > .widget-output").first \
            .locator(".jp-OutputArea-output")
        self.table = self.root.locator(":scope > .widget-html .widget-html-content")

    def set_slider(self, label: str, value: int) -> None:
        """Type ``value`` into the slider's readout and press Enter; wait until the slider shows it."""
        slider = self.root.locator(".widget-slider").filter(has=self.label(label))
        readout = slider.locator(".widget-readout")
        readout.fill(str(value))
        readout.press("Enter")
        handle = slider.locator("[role='slider']")
        handle.page.wait_for_function(
            "([el, v]) => el.getAttribute('aria-valuetext') === String(v)",
            arg=[handle.element_handle(), value], timeout=10_000, polling=POLL_MS)

    def choose(self, label: str, option: str) -> None:
        self.root.locator(".widget-dropdown").filter(has=self.label(label)).locator("select") \
            .select_option(option)

    def status_text(self) -> str:
        return self.status.text_content() or ""

    def log_text(self) -> str:
        return "\n".join(self.log_lines.all_text_contents())

    def wait_status(self, pattern: str, timeout_ms: float) -> str:
        """Wait until the status line matches ``pattern`` (a regex) or the run failed."""
        self.status.page.wait_for_function(
            "([el, pattern]) => new RegExp(pattern).test(el.textContent) "
            "|| /^(failed|error)/.test(el.textContent)",
            arg=[self.status.element_handle(), pattern], timeout=timeout_ms, polling=POLL_MS)
        text = self.status_text()
        assert re.search(pattern, text), f"the run ended with status {text!r}; log:\n{self.log_text()[-3000:]}"
        return text

    def wait_finished(self, pattern: str, timeout_ms: float) -> str:
        """Wait until the run is over (Run enabled again, Stop disabled: the panel's last act)
        and check that the status line matches ``pattern``."""
        self.status.page.wait_for_function(
            "([run, stop]) => !run.disabled && stop.disabled",
            arg=[self.run_button.element_handle(), self.stop_button.element_handle()],
            timeout=timeout_ms, polling=POLL_MS)
        return self.wait_status(pattern, 1_000)


PANEL_ARGS = re.compile(r"default_args=\((?:\s*\"--t(?:rain|est)-subset\",\s*\"\d+\",?)+\s*\)")
SMALL_PANEL_ARGS = 'default_args=("--train-subset", "256", "--test-subset", "256")'


def small_panel_data(notebook: Path) -> None:
    """Make the ``ControlPanel(`` cell of ``notebook`` (the lab's scratch copy) train on 256 images and
    test on 256, not the course's 2048 and 512: the panel's runs then take seconds less each.

    Raises:
        AssertionError: The cell has no ``default_args=("--train-subset", "N", "--test-subset", "M")``
            (the notebook changed: update PANEL_ARGS, do not run the big data silently).
    """
    book = json.loads(notebook.read_text())
    panel_cells = [cell for cell in book["cells"] if cell["cell_type"] == "code"
                   and "ControlPanel(" in "".join(cell["source"])]
    assert panel_cells, f"{notebook.name} has no ControlPanel( cell"
    source = "".join(panel_cells[0]["source"])
    small, count = PANEL_ARGS.subn(SMALL_PANEL_ARGS, source)
    assert count == 1, f"the ControlPanel( cell of {notebook.name} does not set the subsets " \
                       f"the test shrinks ({PANEL_ARGS.pattern}):\n{source}"
    panel_cells[0]["source"] = small.splitlines(keepends=True)
    notebook.write_text(json.dumps(book, indent=1, ensure_ascii=False) + "\n")


def _script_words() -> list[str]:
    from course_lib.lessons.horovod.widgets import default_script

    return ["horovodrun", default_script().name]


def test_horovod_control_panel_runs_and_stops_in_the_lab(open_notebook, lab) -> None:
    """The panel cell's training data is cut down in the lab's scratch copy first (``small_panel_data``):
    what the runs show in the panel does not depend on how many images they train on."""
    small_panel_data(lab.notebook_dir / "03_horovod.ipynb")
    nb = open_notebook("03_horovod.ipynb")
    with nb.step("find the Setup cells and the ControlPanel( cell of 03_horovod.ipynb"):
        cells = labdriver.notebook_cells(lab.notebook_dir / "03_horovod.ipynb")
        to_run = labdriver.setup_and_panel_cells(cells)
        panel_index = to_run[-1]
    with nb.step("Edit ▸ Clear Outputs of All Cells"):
        nb.clear_all_outputs()
    for index in to_run:
        with nb.step(f"run cell {index} (Ctrl+Enter): {cells[index]['source'][:60]!r}"):
            nb.run_cell(index, timeout_ms=RUN_TIMEOUT_MS)
            errors = nb.error_outputs()
            assert not errors, f"cell {index} failed:\n" + "\n".join(e[-3000:] for e in errors)
    with nb.step("the control panel is displayed"):
        panel = Panel(nb, panel_index)
        panel.run_button.wait_for(state="visible", timeout=30_000)
        assert panel.status_text() == "idle"
        nb.screenshot("panel", panel.root)

    with nb.step("set 2 workers, 2 epochs, gloo, and click Run"):
        panel.set_slider("workers", 2)
        panel.set_slider("epochs", 2)
        panel.choose("controller", "gloo")
        panel.run_button.click()
        panel.wait_status(r"^running 2 workers", 30_000)
    with nb.step("live log lines appear and the progress bar advances while the run goes on"):
        nb.page.wait_for_function(
            "([bar, status]) => /^epoch [12]\\/2/.test(bar.textContent) "  # 2/2: the run is in its last
            "|| !status.textContent.startsWith('running')",                # epoch's evaluation, still running
            arg=[panel.progress_label.element_handle(), panel.status.element_handle()],
            timeout=RUN_TIMEOUT_MS, polling=POLL_MS)
        lines_during = panel.log_lines.count()
        status_during = panel.status_text()
        nb.screenshot("run-in-progress", panel.root)
        assert status_during.startswith("running"), \
            f"the run ended before an epoch was shown: {status_during!r}; log:\n{panel.log_text()[-3000:]}"
        assert lines_during > 0, "no log line was shown while the run was going on"
    with nb.step("the run ends: progress 2/2, status done"):
        panel.wait_finished(r"^done: 2 workers", RUN_TIMEOUT_MS)
        assert panel.progress_label.text_content().startswith("epoch 2/2")
        assert panel.log_lines.count() >= lines_during
        assert "1-device baseline" in (panel.table.text_content() or ""), \
            f"without a 1-worker run the table should ask for a baseline: {panel.table.text_content()!r}"

    with nb.step("a 1-worker baseline run (2 epochs: a warm-up-only run is kept out) makes the table appear"):
        panel.set_slider("workers", 1)
        panel.set_slider("epochs", 2)
        panel.run_button.click()
        panel.wait_status(r"^running 1 workers", 30_000)
        panel.wait_finished(r"^done: 1 workers", RUN_TIMEOUT_MS)
        table = panel.table.locator("table")
        table.wait_for(state="visible", timeout=30_000)
        header = [h.strip() for h in table.locator("th").all_text_contents()]
        assert "devices" in header and "speedup" in header, f"unexpected table header {header}"
        devices = [row.locator("td").nth(header.index("devices")).text_content().strip()
                   for row in table.locator("tbody tr").all()]
        assert devices == ["1", "2"], f"the table should list the 1- and 2-worker runs, got {devices}"
        nb.screenshot("results-table", panel.root)

    words = _script_words()
    with nb.step("start another 2-worker run and wait until its ranks are running"):
        panel.set_slider("workers", 2)
        panel.set_slider("epochs", 20)
        panel.run_button.click()
        panel.wait_status(r"^running 2 workers", 30_000)
        deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
        ranks = []
        while len(ranks) < 2 and time.monotonic() < deadline:
            ranks = [p for p in marked_processes(lab.mark, words[1:]) if "horovodrun" not in
                     " ".join(p.cmdline())]
            time.sleep(0.2)
        assert len(ranks) >= 2, f"the ranks of the run never started; log:\n{panel.log_text()[-2000:]}"
        assert marked_processes(lab.mark, words[:1]), "no horovodrun process carries the lab's mark"
        # Stopped as soon as both ranks exist (still starting up: no log line to wait for, that was
        # shown by the first run): the Stop must end them at any moment, and a rank killed while it
        # imports TensorFlow costs seconds less than one killed in its first epoch.
    with nb.step("click Stop: the run ends and leaves no horovodrun or rank process"):
        panel.stop_button.click()
        panel.wait_finished(r"^stopped", 60_000)
        left = marked_processes(lab.mark, words)
        assert not left, "processes of the stopped run are still alive:\n" + labdriver.describe(left)
        nb.screenshot("stopped", panel.root)
    with nb.step("the scaling plot of the runs shows in the panel (below the table)"):
        plot = panel.root.locator(":scope > .widget-output").nth(1)
        images = plot.locator("img").count()
        assert images >= 1, (
            "the panel's plot area is empty although the results table has a 1-worker baseline: "
            "ControlPanel draws the plot with `with self.plot: display(figure)` from its run thread, "
            "and output captured that way from a background thread never reaches JupyterLab; "
            "use self.plot.append_display_data(...) instead")
    assert all(is_png(path) for path in nb.screenshots), nb.screenshots


# -- stopping the lab ---------------------------------------------------------------------------------
def test_lab_stops_leaving_nothing_running(lab) -> None:
    """(The file browser this test used to open a page for is checked on 00_setup's page, a JupyterLab load less.)"""
    problems = lab.stop()
    assert not problems, "stopping the lab was not clean:\n" + "\n".join(problems)
    assert lab.proc.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(lab.proc.pid, 0)  # the server's process group is gone
    left = marked_processes(lab.mark)
    assert not left, "processes started by the lab are still alive:\n" + labdriver.describe(left)
