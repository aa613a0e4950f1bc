"""A control panel to launch Horovod runs from a notebook and compare their throughput.

``ControlPanel`` shows sliders for the number of workers, the per-worker batch size and the
epochs, a controller choice (Gloo / MPI), Run and Stop buttons, the live log, an epoch progress
bar fed by the script's JSON ``epoch`` events, and, refreshed after each run, a table
(``course_lib.lessons.common.scaling.scaling_table``, which needs a 1-worker baseline run) and its plot
(``course_lib.lessons.common.scaling.plot_scaling``).

Everything the buttons do is a public method a cell can call as well::

    panel = ControlPanel()
    panel.display()
    result = panel.run(workers=2, batch_size=64, epochs=1)      # blocks, returns a RunResult
    panel.run(workers=2, wait=False); panel.stop()               # background run, stopped

Runs go through :func:`course_lib.runner.launch.run_horovod` (stop via its ``stop_event``), so a
stopped or failed run leaves no process behind. ipywidgets is imported only when a panel is
built.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import html
import io
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from course_lib.lessons.common import scaling
from course_lib.lessons.horovod.run_notes import PANEL_WITHOUT_WIDGETS, superlinear_notes, warmup_only
from course_lib.runner import launch
from course_lib.runner.launch import LaunchError, RunFailedError, RunStoppedError
from course_lib.training.machine.capacity import plan_workers
from course_lib.training.files import course_root

__all__ = ["ControlPanel", "default_script"]


def default_script() -> Path:
    """The course's Horovod script, ``<repo>/source_code/horovod_fmnist.py``."""
    return course_root() / "source_code" / "horovod_fmnist.py"


class ControlPanel:
    """Notebook panel over :func:`course_lib.runner.launch.run_horovod` and ``course_lib.lessons.common.scaling``.

    Args:
        script: The Horovod script; it must accept ``--batch-size N --epochs E --json`` and
            print the JSON lines of ``docs/architecture.md``. Default: :func:`default_script`.
        records_path: JSON file where the run records are kept between sessions (loaded if it
            exists, rewritten atomically after each run); ``None``: keep them in memory.
        default_args: More script arguments, passed after the panel's own.
        python: Interpreter of the ranks.
        timeout: Seconds after which a run is ended; ``None``: no limit.

    Attributes:
        records: The ``RunRecord`` of every successful run, oldest first.
        figure: The last scaling plot (``matplotlib.figure.Figure``), or ``None``.
        last_result: The ``RunResult`` of the last run that finished, or ``None``.
        last_error: The exception of the last run that failed, or ``None``.
    """

    def __init__(self, script: str | Path | None = None, *, records_path: str | Path | None = None,
                 default_args: Sequence[str] = ("--train-subset", "6000"),
                 python: str = sys.executable, timeout: float | None = None) -> None:
        import ipywidgets as w

        self.script = Path(script) if script is not None else default_script()
        self.records_path = Path(records_path) if records_path is not None else None
        self.default_args = [str(a) for a in default_args]
        self.python = python
        self.timeout = timeout
        # The same decision as notebook 03's runs (one GPU: CPU workers); its slots are the machine's
        # cores or GPUs of that device (machine_capacity, which honours $COURSE_SLOTS).
        self.plan = plan_workers(at_most=2)
        self.slots = self.plan.slots
        self.records: list[Any] = self._load_records()
        self.last_result: Any = None  # the last RunResult
        self.last_error: BaseException | None = None
        self.figure: Any = None  # the last scaling plot (matplotlib Figure)
        self._thread: threading.Thread | None = None
        self._stop_event: threading.Event | None = None

        self.workers = w.IntSlider(value=self.plan.workers, min=1,
                                   max=max(2 * self.slots, self.plan.workers), description="workers")
        self.oversubscribe_note = w.HTML()
        self.batch_size = w.IntSlider(value=64, min=8, max=1024, step=8,
                                      description="batch/worker")
        self.epochs = w.IntSlider(value=2, min=1, max=20, description="epochs")
        self.controller = w.Dropdown(options=["gloo", "mpi"], value="gloo",
                                     description="controller")
        self.run_button = w.Button(description="Run", button_style="success", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop",
                                    disabled=True)
        self.status = w.HTML(value="idle")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="epoch 0/?")
        self.log = w.Output(layout=w.Layout(height="240px", overflow="auto",
                                            border="1px solid #ccc"))
        self.table = w.HTML()
        self.plot = w.Output()
        self.widget = w.VBox([
            w.HBox([self.workers, self.oversubscribe_note]),
            w.HBox([self.batch_size, self.epochs, self.controller]),
            w.HBox([self.run_button, self.stop_button, self.status]),
            self.progress, self.log, self.table, self.plot,
        ])
        for name in ("workers", "batch_size", "epochs", "controller", "run_button", "stop_button",
                     "status", "progress", "log", "table", "plot"):  # stable hooks for browser tests
            getattr(self, name).add_class("course-" + name.replace("_button", "").replace("_", "-"))
        self.workers.observe(lambda _change: self._update_note(), names="value")
        self.run_button.on_click(lambda _button: self._on_run_clicked())
        self.stop_button.on_click(lambda _button: self.stop())
        self._update_note()
        self._refresh_results()

    # -- public API ---------------------------------------------------------------------------
    def display(self) -> None:
        """Show the panel; a static page of the notebook (no widgets there) shows what it holds instead."""
        from IPython.display import display

        display({**self.widget._repr_mimebundle_(), "text/html": PANEL_WITHOUT_WIDGETS}, raw=True)

    def _ipython_display_(self) -> None:
        self.display()

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._thread is not None and self._thread.is_alive()

    def run(self, workers: int | None = None, batch_size: int | None = None,
            epochs: int | None = None, controller: str | None = None, wait: bool = True):
        """Launch one run with these settings (``None``: the widget's current value).

        Args:
            workers: Horovod processes; beyond the machine's slots the run is oversubscribed.
            batch_size: Per-worker batch size. epochs: Epochs to train.
            controller: ``"gloo"`` or ``"mpi"``.
            wait: ``True``: block and return the ``RunResult``. ``False``: run in a background
                thread (the Stop button works) and return ``None``; see :meth:`wait`.

        Returns:
            The ``RunResult`` (``wait=True``), else ``None``; ``None`` too if the run was stopped.

        Raises:
            course_lib.runner.launch.LaunchError: Bad settings, or a run is already in progress.
            course_lib.runner.launch.RunFailedError: The run failed (``wait=True`` only).
        """
        if self.running:
            raise LaunchError("a run is already in progress; call panel.stop() or panel.wait()")
        values = {"workers": workers, "batch_size": batch_size, "epochs": epochs}
        for name, value in values.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise LaunchError(f"{name}={value!r} must be a positive int")
        if controller is not None and controller not in ("gloo", "mpi"):
            raise LaunchError(f"controller={controller!r} must be 'gloo' or 'mpi'")
        if not self.script.is_file():
            raise LaunchError(f"script not found: {self.script}; pass script= to ControlPanel")
        for slider, value in ((self.workers, workers), (self.batch_size, batch_size), (self.epochs, epochs)):
            if value is not None:   # a value past the slider's end widens it
                slider.max = max(slider.max, value)
                slider.value = value
        if controller is not None:
            self.controller.value = controller
        self._stop_event = threading.Event()
        self.last_error = None
        self.progress.value, self.progress.max = 0, self.epochs.value
        self.progress.description = f"epoch 0/{self.epochs.value}"
        self.run_button.disabled, self.stop_button.disabled = True, False
        self.log.clear_output()
        self._set_status(f"running {self.workers.value} workers ({self.controller.value})…")
        self._thread = threading.Thread(target=self._run_in_thread, daemon=True,
                                        name="course_lib-panel-run")
        self._thread.start()
        return self.wait() if wait else None

    def wait(self, timeout: float | None = None):
        """Wait for the current run (if any) and return its ``RunResult``.

        Args:
            timeout: Seconds to wait at most; ``None``: until the run ends.

        Returns:
            The ``RunResult``, or ``None`` if the run was stopped or is still going.

        Raises:
            course_lib.runner.launch.RunFailedError: The run failed (not raised for a stopped run).
        """
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return None
        if self.last_error is not None and not isinstance(self.last_error, RunStoppedError):
            raise self.last_error
        return None if self.last_error is not None else self.last_result

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the current run and wait until all its processes are gone (no-op when idle).

        Args:
            timeout: Seconds to wait for the clean-up at most.
        """
        if self._stop_event is not None:
            self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- internals ----------------------------------------------------------------------------
    def _run_in_thread(self) -> None:
        workers, controller = self.workers.value, self.controller.value
        args = ["--batch-size", str(self.batch_size.value), "--epochs", str(self.epochs.value),
                "--json", *self.default_args]
        try:
            result = launch.run_horovod(self.script, args, workers=self.plan.with_workers(workers),
                                        horovodrun=launch.Horovodrun(controller=controller), output=self.log,
                                        stop_event=self._stop_event, on_event=self._on_event,
                                        timeout=self.timeout, python=self.python)
            self.last_result = result
            done = f"done: {workers} workers in {result.duration_s:.1f} s"
            if result.result is not None and warmup_only(result):
                done += ("; not added to the scaling table: every epoch was warm-up (tracing, "
                         "caches), which says nothing about scaling; run 2 epochs or more")
            elif result.result is not None:
                self.records.append(scaling.to_record(result, label=f"horovod-{controller} x{workers}"))
                self._save_records()
            self._set_status(done)
            self._refresh_results()
        except RunStoppedError as exc:
            self.last_error, self.last_result = exc, exc.result
            self._set_status("stopped (all processes of the run ended)")
        except RunFailedError as exc:
            self.last_error, self.last_result = exc, exc.result
            self._set_status(f"failed: {exc}", error=True)
        except BaseException as exc:  # reported in the panel and re-raised by wait()
            self.last_error = exc
            self._set_status(f"error: {type(exc).__name__}: {exc}", error=True)
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True

    def _on_event(self, event: dict) -> None:
        if event.get("event") == "config" and isinstance(event.get("epochs"), int):
            self.progress.max = max(1, event["epochs"])
        elif event.get("event") == "epoch" and isinstance(event.get("epoch"), int):
            self.progress.value = min(event["epoch"], self.progress.max)
            self.progress.description = f"epoch {self.progress.value}/{self.progress.max}"

    def _on_run_clicked(self) -> None:
        try:
            self.run(wait=False)
        except Exception as exc:  # a button has no caller to raise to: show it
            self._set_status(f"error: {exc}", error=True)

    def _set_status(self, text: str, error: bool = False) -> None:
        style = "color:#b00020;white-space:pre-wrap" if error else "white-space:pre-wrap"
        self.status.value = f'<span style="{style}">{html.escape(text)}</span>'

    def _update_note(self) -> None:
        n = self.workers.value
        self.oversubscribe_note.value = "" if n <= self.slots else (
            f"<b>oversubscribed:</b> {n} workers on {self.slots} slots share them; "
            "timings are not representative of scaling")

    def _refresh_results(self) -> None:
        if not self.records:
            self.table.value = "<i>no runs yet</i>"
            return
        from IPython.display import Image

        try:
            table = scaling.scaling_table(self.records)
        except ValueError as exc:  # no 1-worker baseline yet, or weak and strong mixed
            self.table.value = f"<i>{html.escape(str(exc))}</i>"
            return
        self.table.value = table.to_html(index=False, float_format=lambda v: f"{v:.3g}") + "".join(
            f'<p class="course-superlinear" style="color:#b00020">&#9888; {html.escape(note)}</p>'
            for note in superlinear_notes(table))
        self.figure = scaling.plot_scaling(table, title="Horovod scaling (this panel's runs)")
        # Runs end in a background thread, and `with output: display(...)` from a thread never
        # reaches JupyterLab; appending the rendered image to the Output widget does.
        png = io.BytesIO()
        self.figure.savefig(png, format="png", dpi=80)
        self.plot.outputs = ()
        self.plot.append_display_data(Image(png.getvalue()))

    def _load_records(self) -> list[Any]:
        if self.records_path is None or not self.records_path.exists():
            return []
        return scaling.load_records(self.records_path)

    def _save_records(self) -> None:
        if self.records_path is not None:
            scaling.save_records(self.records_path, self.records)
