"""What a notebook cell shows: figures as images, launched runs as readable lines.

- :func:`show_figure` displays a ``matplotlib.figure.Figure`` as a PNG image. The course's plot
  helpers build figures without pyplot (so they never pile up in pyplot's state), and Jupyter has
  no image formatter for such a figure unless pyplot's inline backend was loaded: returned bare,
  it shows as the text ``<Figure size ...>``. ``tests/test_notebooks_lint.py`` fails on that.
- :class:`ReadableOutput` is an ``output=`` target for :func:`course_lib.runner.launch.run_horovod`
  that shows a run's human-readable lines and hides its JSON event lines (the ``RunResult`` still
  holds them all); stderr lines stay on stderr.

Introduced in notebooks/01_data_parallelism.ipynb (figures) and notebooks/03_horovod.ipynb (runs).
"""

from __future__ import annotations

import base64
import io
import sys
from typing import Any

__all__ = ["figure_png", "show_figure", "ReadableOutput"]


def figure_png(figure: Any, *, dpi: int = 100) -> bytes:
    """The PNG bytes of ``figure`` (any ``matplotlib.figure.Figure``).

    Args:
        figure: The figure.
        dpi: Resolution.

    Returns:
        The image, as written by ``figure.savefig(format="png")``.

    Raises:
        TypeError: If ``figure`` has no ``savefig`` (not a matplotlib figure).
    """
    if not hasattr(figure, "savefig"):
        raise TypeError(f"expected a matplotlib Figure, got {type(figure).__name__}")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def show_figure(figure: Any, *, dpi: int = 100) -> None:
    """Display ``figure`` as an image (``image/png``) in Jupyter; also fine outside Jupyter.

    The text alternative names the figure (``<Figure: title>``), so a reader of the raw
    notebook knows what the image shows.

    Args:
        figure: A ``matplotlib.figure.Figure`` (e.g. from ``scaling.plot_scaling``).
        dpi: Resolution of the image.
    """
    from IPython.display import display

    titles = [ax.get_title() for ax in figure.get_axes() if ax.get_title()]
    suptitle = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) else ""
    name = suptitle or "; ".join(titles) or "figure"
    png = base64.b64encode(figure_png(figure, dpi=dpi)).decode("ascii")
    display({"image/png": png, "text/plain": f"<Figure: {name}>"}, raw=True)


class ReadableOutput:
    """``output=`` for the launcher: readable lines only; JSON event lines stay in the RunResult.

    Args:
        show_json: Also show the JSON lines (for debugging a script's events).
        show_stdout: ``False``: show only the stderr lines (warnings, tracebacks: never hidden), e.g. for the
            later rounds of a measurement whose first round showed everything; every line stays in the
            RunResult's ``log``.
    """

    def __init__(self, *, show_json: bool = False, show_stdout: bool = True) -> None:
        self.show_json = show_json
        self.show_stdout = show_stdout
        self.hidden = 0

    @staticmethod
    def is_event(text: str) -> bool:
        """Whether ``text`` is a JSON event line (``{"event": ...}``)."""
        stripped = text.strip()
        return stripped.startswith('{"event"') and stripped.endswith("}")

    def append_stdout(self, text: str) -> None:
        """Show a stdout line unless it is a JSON event line."""
        if not self.show_stdout or (self.is_event(text) and not self.show_json):
            self.hidden += 1
            return
        sys.stdout.write(text)
        sys.stdout.flush()

    def append_stderr(self, text: str) -> None:
        """Show a stderr line on stderr (a notebook shows it in red)."""
        sys.stderr.write(text)
        sys.stderr.flush()
