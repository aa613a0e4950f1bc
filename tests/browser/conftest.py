"""Fixtures of the browser tests: the course's JupyterLab and headless Chromium driven by Playwright.

- ``lab``: the lab ``make lab`` starts (``course_lib.environment.lab.lab_command``), on a free loopback port,
  serving a scratch copy of the LEARNER EDITION's notebooks (``make student`` = tools/student.py, built into a
  scratch folder), whose ``course_lib`` the kernels import (``$PYTHONPATH``): what a learner given that tree
  runs, and the proof that the tree stands on its own (issue 31: this replaced a strict nbval run of the
  learner 00_setup in tests/test_student.py). ``$COURSE_BROWSER_NOTEBOOKS`` overrides the source folder
  (served with this checkout's ``course_lib``), for developing these tests against other notebooks. Stopped
  at the end of the module; anything it left running is killed and reported as an error.
- ``browser``: Debian's Chromium (``/usr/bin/chromium``, or ``$COURSE_CHROMIUM``) with a fresh
  profile. Playwright only drives it: never run ``playwright install``. When no Chromium is found or
  it cannot be launched the tests FAIL with the remedy (no silent skips, issue 20); deselect them
  on purpose with ``-m "not browser"``.
- ``open_notebook``: opens a notebook in a new page and returns a ``labdriver.NotebookPage``; on a
  failure the report shows the step, the browser console errors and the screenshots
  (``artifacts/browser/``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

import labdriver

NOTEBOOKS_OVERRIDE = os.environ.get("COURSE_BROWSER_NOTEBOOKS")
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A headless Chromium context with a fresh profile directory."""
    try:
        from playwright.sync_api import Error as PlaywrightError, sync_playwright
    except ImportError as exc:  # a broken set-up, not a reason to skip
        pytest.fail(f"playwright is not installed ({exc}): run `make setup`", pytrace=False)
    executable = labdriver.find_chromium()
    if executable is None:
        pytest.fail("no Chromium found (looked at $COURSE_CHROMIUM, chromium and chromium-browser on "
                    "PATH, /usr/bin/chromium): install it with `sudo apt-get install chromium` (`make "
                    "setup` does, as root), or deselect these tests with -m 'not browser'", pytrace=False)
    playwright = sync_playwright().start()
    try:
        try:
            context = playwright.chromium.launch_persistent_context(
                str(tmp_path_factory.mktemp("chromium-profile")), executable_path=executable,
                headless=True, args=list(labdriver.CHROMIUM_ARGS), viewport=VIEWPORT)
        except PlaywrightError as exc:
            pytest.fail(f"Chromium at {executable} cannot be launched: {str(exc).splitlines()[0]}; "
                        "reinstall it (`sudo apt-get install --reinstall chromium`) or set "
                        "$COURSE_CHROMIUM to a working one", pytrace=False)
        context.set_default_timeout(60_000)
        yield context
        context.close()
    finally:
        playwright.stop()


def learner_edition(dest: Path) -> Path:
    """``dest`` made into the learner edition by ``make student``'s command (tools/student.py --out)."""
    done = subprocess.run([sys.executable, str(labdriver.ROOT / "tools" / "student.py"), "--out", str(dest)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"tools/student.py --out {dest} failed:\n{done.stderr[-3000:]}"
    return dest


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[labdriver.LabServer]:
    """The course's JupyterLab on a scratch copy of the notebooks; stopped (and checked) at the end.

    The screenshots of an earlier run are removed first, so ``artifacts/browser/`` shows this one.
    """
    for old in labdriver.ARTIFACTS.glob("*.png"):
        old.unlink()
    if NOTEBOOKS_OVERRIDE:
        server = labdriver.LabServer(tmp_path_factory.mktemp("lab"), Path(NOTEBOOKS_OVERRIDE))
    else:
        edition = learner_edition(tmp_path_factory.mktemp("student") / "course")
        server = labdriver.LabServer(tmp_path_factory.mktemp("lab"), edition / "notebooks", course_root=edition)
    try:
        yield server
    finally:
        problems = server.stop()
    assert not problems, "the lab left processes behind (now killed):\n" + "\n".join(problems)


@pytest.fixture
def open_notebook(request: pytest.FixtureRequest, browser, lab: labdriver.LabServer
                  ) -> Iterator[Callable[[str], labdriver.NotebookPage]]:
    """``open_notebook("00_setup.ipynb")``: a new page with that notebook open, kernel idle.

    At the end the page is closed and every kernel shut down, so the next test starts clean.
    """
    pages: list[labdriver.NotebookPage] = []
    request.node.notebook_pages = pages

    def _open(name: str) -> labdriver.NotebookPage:
        path = lab.source / name
        if not path.is_file():
            pytest.fail(f"{path} does not exist: the browser test runs the course notebook {name}",
                        pytrace=False)
        page = labdriver.NotebookPage(browser.new_page(), lab, Path(name).stem)
        pages.append(page)
        with page.step(f"open {name} in JupyterLab"):
            page.open(name, cell_count=len(labdriver.notebook_cells(path)))
        return page

    yield _open
    for page in pages:
        page.page.close()
    if lab.running:
        lab.shutdown_kernels()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """On a failure, add the browser's side (step, console errors, screenshots) to the report."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for page in getattr(item, "notebook_pages", ()):
        if page.failed_step is not None:
            continue  # the step's failure message already holds all of it
        try:
            page.screenshot("FAILED")
        except Exception as exc:  # the page may be gone; say so rather than hide the report
            page.console_errors.append(f"(failure screenshot not taken: {exc})")
        report.sections.append((f"browser: {page.name}", page.failure_text()))
