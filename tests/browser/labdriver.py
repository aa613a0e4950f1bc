"""Helpers of the browser tests: the course's JupyterLab server, a notebook driver, process checks.

``LabServer`` starts exactly the lab of ``make lab`` (``course_lib.environment.lab.lab_command``) on a free
loopback port, with its own Jupyter config / runtime / data / IPython folders, and serves a
scratch copy of the notebooks (so autosave and the notebooks' own files never touch the
checkout). Every process it starts carries the environment variable ``MARKER_VAR`` with a
per-server value, so a leftover process (kernel, horovodrun, rank) is found by that mark and
not confused with another test's processes on the same machine.

``NotebookPage`` drives one notebook in JupyterLab the way a learner does: menus, clicks and
keys, with each step named (``with nb.step("..."):``) so that a failure says which step broke,
shows the browser console errors and where the screenshot of that moment is.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Sequence

import psutil

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
MARKER_VAR = "COURSE_BROWSER_TEST_MARK"
# Top-level folders a notebook may read through a relative path ("../source_code/..."); linked
# next to the scratch copy. Folders the notebooks write to (runs/, checkpoints/) are NOT linked.
LINKED = ("source_code", "course_lib", "docs", "tools", "requirements")
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage")
PROMPT_NUMBER = re.compile(r"^\[\d+\]:?$")
# How often a ``wait_for_function`` re-evaluates its condition in the page. Playwright's default ("raf") is every
# animation frame, 60 times a second: over a test's minutes of waiting that kept Chromium's renderer busy (CPU the
# kernels and ranks under test need). A learner-visible change is not missed by looking 5 times a second.
POLL_MS = 200


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def find_chromium() -> str | None:
    """The Chromium to drive: ``$COURSE_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on PATH."""
    candidates = [os.environ.get("COURSE_CHROMIUM"), shutil.which("chromium"),
                  shutil.which("chromium-browser"), "/usr/bin/chromium"]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def marked_processes(mark: str, words: Sequence[str] = ()) -> list[psutil.Process]:
    """Live processes carrying ``MARKER_VAR=mark``, optionally only those whose command line
    contains one of ``words``. Zombies (already ended, not yet reaped) are left out."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(proc.info["cmdline"] or ())
            if words and not any(word in cmdline for word in words):
                continue
            if proc.environ().get(MARKER_VAR) == mark:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def describe(procs: Sequence[psutil.Process]) -> str:
    """One line per process: pid and command line."""
    lines = []
    for proc in procs:
        try:
            lines.append(f"  pid {proc.pid}: {' '.join(proc.cmdline())[:200]}")
        except psutil.Error:
            lines.append(f"  pid {proc.pid}: (ended while listed)")
    return "\n".join(lines)


def is_png(path: Path) -> bool:
    """Whether ``path`` is a non-trivial PNG file."""
    return path.is_file() and path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class LabServer:
    """The course's JupyterLab (``course_lib.environment.lab.lab_command``) on a scratch copy of the notebooks.

    Args:
        workdir: Empty folder for the copy (``workdir/notebooks``) and the Jupyter folders.
        source: Folder whose notebooks are copied (the course's ``notebooks/``, or a learner edition's).
        startup_timeout: Seconds to wait for ``/api/status`` to answer.
        course_root: The course tree the notebooks belong to: its :data:`LINKED` folders are linked beside the
            copy, and where it is not this checkout (a learner edition, ``make student``) it goes first on the
            lab's ``$PYTHONPATH``, so the kernels and the runs they launch import its ``course_lib``.
    """

    def __init__(self, workdir: Path, source: Path, startup_timeout: float = 120.0,
                 course_root: Path = ROOT) -> None:
        from course_lib.environment.lab import lab_command

        self.workdir = workdir
        self.source = source
        self.course_root = course_root
        self.notebook_dir = workdir / "notebooks"
        shutil.copytree(source, self.notebook_dir,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        for name in LINKED:
            if (course_root / name).exists():
                (workdir / name).symlink_to(course_root / name)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.mark = secrets.token_hex(8)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "lab.log"
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(workdir / "jupyter-config"),
               "JUPYTER_RUNTIME_DIR": str(workdir / "jupyter-runtime"),
               "JUPYTER_DATA_DIR": str(workdir / "jupyter-data"),  # python3 kernel: sys.prefix
               "IPYTHONDIR": str(workdir / "ipython"), MARKER_VAR: self.mark}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # as `make lab` exports it
        # As make exports it too (tools/learner.mk): the venv the lab runs in, beside which the doctor and notebook 07
        # find .venv-07 (course_lib.environment.frameworks); a learner edition's scratch copy has no venv of its own.
        env.setdefault("COURSE_VENV", sys.prefix)
        if course_root != ROOT:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(course_root), env.get("PYTHONPATH", "")]))
        self.env = env
        for name in ("JUPYTER_PATH", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
            env.pop(name, None)
        self.command = lab_command(port=self.port, token=self.token, notebook_dir=self.notebook_dir)
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(self.command, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready(startup_timeout)

    # -- REST API ------------------------------------------------------------------------------
    def api(self, path: str, method: str = "GET", timeout: float = 10.0) -> Any:
        """Call the server's REST API and return the decoded JSON (``None`` for an empty body)."""
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with status {self.proc.returncode} at start:\n"
                                   f"{self.log_text()}")
            try:
                self.api("status", timeout=2)
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"JupyterLab did not answer on {self.url} within {timeout:.0f} s:\n"
                           f"{self.log_text()}")

    def log_text(self, tail: int = 6000) -> str:
        """The end of the server's log."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-tail:]

    def lab_url(self, notebook: str) -> str:
        """URL that opens ``notebook`` in a fresh workspace (``reset``), logged in by token."""
        return f"{self.url}/lab/tree/{notebook}?reset&token={self.token}"

    def shutdown_kernels(self, timeout: float = 30.0) -> None:
        """Shut every session and kernel down through the API and wait until none is listed.

        Raises:
            AssertionError: Kernels are still listed after ``timeout`` seconds.
        """
        for session in self.api("sessions"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.api(f"sessions/{session['id']}", method="DELETE", timeout=timeout)
        for kernel in self.api("kernels"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.api(f"kernels/{kernel['id']}", method="DELETE", timeout=timeout)
        deadline = time.monotonic() + timeout
        while self.api("kernels") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not self.api("kernels"), f"kernels still running after shutdown: {self.api('kernels')}"

    # -- stop ----------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Stop the lab like Ctrl+C would (kernels first, then SIGTERM to the server).

        Anything still alive afterwards (the server's process group, a process carrying this
        server's mark) is killed, and reported in the returned list so a test can fail on it.

        Returns:
            Descriptions of what had to be killed (empty when the stop was clean).
        """
        problems: list[str] = []
        if self.running:
            try:
                self.shutdown_kernels(timeout)
            except (OSError, AssertionError) as exc:
                problems.append(f"kernel shutdown through the API failed: {exc}")
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                problems.append(f"server pid {self.proc.pid} ignored SIGTERM for {timeout:.0f} s")
        try:
            os.killpg(self.proc.pid, 0)
            alive = [p for p in psutil.process_iter(["pid"]) if _pgid(p) == self.proc.pid]
            if alive:
                problems.append("server process group still alive:\n" + describe(alive))
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        deadline = time.monotonic() + 5
        left = marked_processes(self.mark)
        while left and time.monotonic() < deadline:  # processes the group kill may still be ending
            time.sleep(0.2)
            left = marked_processes(self.mark)
        if left:
            problems.append("processes started by the lab still alive:\n" + describe(left))
            for proc in left:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        self._log.close()
        return problems


def _pgid(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except (ProcessLookupError, PermissionError):
        return None


class NotebookPage:
    """One notebook open in JupyterLab in a Playwright page, driven like a learner would.

    Args:
        page: A Playwright ``Page`` (console errors are collected from the moment it is given).
        lab: The server.
        name: Short name used in screenshot file names.
    """

    def __init__(self, page: Any, lab: LabServer, name: str) -> None:
        self.page = page
        self.lab = lab
        self.name = name
        self.console_errors: list[str] = []
        self.current_step = "(none yet)"
        self.failed_step: str | None = None
        self.screenshots: list[Path] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.console_errors.append(f"pageerror: {exc}"))

    def _on_console(self, message: Any) -> None:
        if message.type == "error":
            self.console_errors.append(f"console.error: {message.text}")

    # -- steps, screenshots ----------------------------------------------------------------------
    def screenshot(self, label: str, element: Any = None) -> Path:
        """Save a screenshot of the page (or of ``element``, a locator, whole even when it is
        taller than the window) under ``artifacts/browser/`` and return its path."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)}.png"
        if element is not None:
            element.screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path))
        self.screenshots.append(path)
        return path

    def failure_text(self) -> str:
        """What a failure report shows: step, console errors, screenshots, end of the lab log."""
        errors = "\n".join(f"  {e[:500]}" for e in self.console_errors[-20:]) or "  (none)"
        shots = "\n".join(f"  {p}" for p in self.screenshots) or "  (none)"
        return (f"browser step: {self.current_step}\nbrowser console errors:\n{errors}\n"
                f"screenshots:\n{shots}\nend of the JupyterLab log:\n{self.lab.log_text(2000)}")

    @contextlib.contextmanager
    def step(self, description: str) -> Iterator[None]:
        """Name a step; on any failure inside it, screenshot and fail with the details."""
        self.current_step = description
        started = time.monotonic()
        try:
            yield
            print(f"step {time.monotonic() - started:6.1f} s: {description}")  # shown with -rP
        except Exception as exc:
            shot = "(screenshot failed)"
            with contextlib.suppress(Exception):
                shot = str(self.screenshot("FAILED"))
            self.failed_step = description
            import pytest

            pytest.fail(f"step {description!r} failed: {type(exc).__name__}: {exc}\n"
                        f"failure screenshot: {shot}\n{self.failure_text()}", pytrace=True)

    # -- notebook ----------------------------------------------------------------------------------
    def open(self, notebook: str, cell_count: int, timeout_ms: float = 120_000) -> None:
        """Open ``notebook`` in a fresh workspace; wait for its ``cell_count`` cells and an idle kernel."""
        self.notebook = notebook
        # JupyterLab asks once whether to fetch Jupyter news; answer "No" as a learner would.
        self.page.add_locator_handler(
            self.page.locator(".Toastify__toast", has_text="Jupyter news"),
            lambda toast: toast.get_by_role("button", name="No", exact=True).click())
        self.page.goto(self.lab.lab_url(notebook), wait_until="domcontentloaded", timeout=timeout_ms)
        self.panel = self.page.locator(".jp-NotebookPanel").first
        self.panel.wait_for(state="visible", timeout=timeout_ms)
        self.page.wait_for_function(
            "([panel, n]) => panel.querySelectorAll('.jp-Cell').length === n",
            arg=[self.panel.element_handle(), cell_count], timeout=timeout_ms, polling=POLL_MS)
        self.wait_kernel_idle(timeout_ms)

    def wait_kernel_idle(self, timeout_ms: float = 120_000) -> None:
        """Wait until the server has a kernel for this notebook and it is idle, and the toolbar
        of the notebook shows it idle too."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            states = [s["kernel"]["execution_state"] for s in self.lab.api("sessions")
                      if s.get("path") == self.notebook and s.get("kernel")]
            if states and all(state == "idle" for state in states):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the kernel of {self.notebook} is not idle after "
                                   f"{timeout_ms / 1000:.0f} s: {states or 'no session'}")
            time.sleep(0.2)
        self.page.wait_for_function(
            """(panel) => {
                const s = panel.querySelector('.jp-Notebook-ExecutionIndicator');
                return s && s.getAttribute('data-status') === 'idle';
            }""", arg=self.panel.element_handle(), timeout=timeout_ms, polling=POLL_MS)

    def menu(self, menu: str, item: str) -> None:
        """Click ``menu`` in the menu bar, then its entry ``item``."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(rf"^{re.escape(menu)}$")).click()
        self.page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel",
                          has_text=re.compile(rf"^{re.escape(item)}$")).click()

    def cell(self, index: int) -> Any:
        """Locator of the ``index``-th cell (0-based, as in the .ipynb file)."""
        return self.panel.locator(".jp-Cell").nth(index)

    def prompts(self) -> list[str]:
        """The input prompt of every code cell, in order (``"[3]:"``, ``"[*]:"``, ``"[ ]:"``)."""
        return [text.strip() for text in
                self.panel.locator(".jp-CodeCell .jp-InputArea-prompt").all_text_contents()]

    def clear_all_outputs(self) -> None:
        """Edit ▸ Clear Outputs of All Cells, and check that every prompt is blank afterwards."""
        self.menu("Edit", "Clear Outputs of All Cells")
        self.page.wait_for_function(
            """(panel) => [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                   .every(p => !/\\d/.test(p.textContent))""",
            arg=self.panel.element_handle(), timeout=10_000, polling=POLL_MS)

    def run_all(self, timeout_ms: float) -> None:
        """Run ▸ Run All Cells, then wait until the run is over (or stopped at an error)."""
        self.menu("Run", "Run All Cells")
        self.wait_run_over(timeout_ms)

    def wait_run_over(self, timeout_ms: float, index: int | None = None) -> None:
        """Wait until no code cell (or cell ``index``) is running or queued and each has a number,
        or the run stopped at an error (a traceback is shown); then for an idle kernel."""
        self.page.wait_for_function(
            """([panel, index]) => {
                let cells = [...panel.querySelectorAll('.jp-Cell')];
                if (index !== null) cells = [cells[index]];
                const code = cells.filter(c => c.classList.contains('jp-CodeCell'));
                const prompt = c => c.querySelector('.jp-InputArea-prompt').textContent.trim();
                if (code.some(c => prompt(c).includes('*'))) return false;
                if (code.every(c => /\\[\\d+\\]/.test(prompt(c)))) return true;
                return cells.some(c => [...c.querySelectorAll('.jp-OutputArea-output')]
                    .some(o => o.textContent.includes('Traceback')));
            }""", arg=[self.panel.element_handle(), index], timeout=timeout_ms, polling=POLL_MS)
        self.wait_kernel_idle(timeout_ms)

    def run_cell(self, index: int, timeout_ms: float) -> None:
        """Select cell ``index`` (click its prompt), press Ctrl+Enter, wait for its result."""
        cell = self.cell(index)
        cell.scroll_into_view_if_needed()
        cell.locator(".jp-InputArea-prompt").click()
        self.page.keyboard.press("Control+Enter")
        self.wait_run_over(timeout_ms, index)

    def error_outputs(self) -> list[str]:
        """Texts of the outputs that show a Python error (a traceback)."""
        errors = []
        for selector in ('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]',
                         ".jp-RenderedText"):
            for text in self.panel.locator(selector).all_text_contents():
                if "Traceback" in text:
                    errors.append(text)
        return list(dict.fromkeys(errors))

    def output_text(self) -> str:
        """All output text of the notebook."""
        return "\n".join(self.panel.locator(".jp-OutputArea-output").all_text_contents())


def notebook_cells(path: Path) -> list[dict]:
    """The cells of an .ipynb file, each with ``source`` joined into one string."""
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return cells


def setup_and_panel_cells(cells: Sequence[dict], marker: str = "ControlPanel(") -> list[int]:
    """Indices of the code cells to run for the control panel: the cells of the notebook's
    "Setup" section (from a markdown heading containing "Setup" to the next heading) and the
    first code cell whose source contains ``marker``.

    Raises:
        LookupError: No code cell contains ``marker``.
    """
    chosen: list[int] = []
    in_setup = False
    for index, cell in enumerate(cells):
        source = cell["source"]
        if cell["cell_type"] == "markdown":
            heading = re.search(r"^#+\s*(.*)$", source, re.MULTILINE)
            if heading:
                in_setup = "setup" in heading.group(1).lower()
            continue
        if cell["cell_type"] != "code":
            continue
        if marker in source:
            return chosen + [index]
        if in_setup:
            chosen.append(index)
    raise LookupError(f"no code cell contains {marker!r}")
