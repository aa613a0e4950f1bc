"""pytest + nbval settings for the notebooks: stderr is checked, not compared.

The notebooks' harness lives here, in ``tests/notebooks/``, so that the folder a learner opens holds the lessons
only; the course's root ``conftest.py`` registers this module as a pytest plugin whenever nbval runs (a scratch
copy named ``conftest.py`` next to scratch notebooks works as it is, as the tests of this harness use it).

stderr is excluded from the output comparison, because TensorFlow and Horovod write warnings there
whose wording and number vary with the machine. It is not ignored: after a cell has run, every line
it wrote to stderr is matched against the known, harmless warnings listed (each with its origin) in
``tests/notebooks/stderr_allow.txt``; a remaining line that is an error fails the cell, even when the
cell itself raised nothing:

- a Python traceback (``Traceback (most recent call last):``), e.g. a Horovod rank's, relayed by the
  launcher while the run still exited 0;
- a TensorFlow / absl C++ log line of level ``E`` or ``F`` (``E0000 00:00:...`` or
  ``2026-... : E tensorflow/...cc:12]``);
- a Python logging line of level ERROR / CRITICAL / FATAL (``ERROR:absl:...``, tfds's and TF's);
- an exception line (``SomethingError: message``), e.g. a tfds error printed without a traceback.

Other stderr lines (warnings, progress bars) pass. ``tests/test_notebook_stderr.py`` runs nbval
on scratch notebooks to show that a traceback on stderr fails and an allowed warning passes.

**A busy neighbour** (issue 31): with ``COURSE_BUSY_NEIGHBOUR=1`` (``make test-busy``) the session starts one
process that keeps one core busy (a Python spin loop at normal priority) before the first notebook and ends
it after the last, so every verdict nbval compares is put to the test on a machine that is not quiet, as
a CI runner or a room's server rarely is. The neighbour dies with the pytest process that started it.

**The learner edition's differing cells run too** (issue 31): after a notebook's last cell, in the same kernel,
nbval runs the learner edition's cells from the placeholder before the first solution to the end (items named
``Learner cell N``; ``tools/maintainers/learner_tail.py`` says why the course's state there stands for the learner's). The
learner cells before that point are the course's own (``tests/test_student.py``), so nothing runs twice.

**The notebooks run one after another** when pytest-xdist shares the suite out (``make test``: ``--dist loadfile``):
all of them form one unit of work, so one worker runs them while the other takes the test files
(:func:`pytest_xdist_make_scheduler`) at a lower priority (``tests/conftest.py``: ``TEST_WORKER_NICE``).

**A dead kernel fails its cell within seconds**: nbval waits for a cell's reply up to the cell limit and never
checks the kernel; here the wait is cut in slices of ``KERNEL_CHECK_S`` with a check between them, so a kernel
that was killed (out of memory, a signal) fails the cell at once, saying so (``tests/test_notebook_stderr.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from queue import Empty
from typing import Iterable, Iterator

import nbval.kernel
import nbval.plugin
import pytest

ALLOW_FILE = Path(__file__).with_name("stderr_allow.txt")
BUSY_ENV = "COURSE_BUSY_NEIGHBOUR"
#: The neighbour: a spin loop that dies with its parent (prctl PR_SET_PDEATHSIG = 1, signal 9).
SPIN = "import ctypes\nctypes.CDLL(None).prctl(1, 9, 0, 0, 0)\nwhile True:\n    pass\n"
_neighbour: subprocess.Popen | None = None

#: What makes a stderr line an error (searched anywhere in the line: the launcher prefixes rank lines).
ERROR_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"Traceback \(most recent call last\)",
    r"(?:^|[\s\]:>])[EF]\d{4} \d\d:\d\d:\d\d",                 # absl C++ (glog) level E / F
    r"\d\d:\d\d:\d\d\.\d+: [EF] \S+:\d+\]",                   # TensorFlow C++ logging, level E / F
    r"\b(?:ERROR|CRITICAL|FATAL):",                           # Python logging: ERROR:absl:, ERROR:root:
    r"(?:^|[\s\]:>])(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): ",  # e.g. DatasetNotFoundError: ...
))


#: An allow-list line starting with this applies only where the machine takes TensorFlow's GPU build
#: (course_lib.environment.tensorflow_build.tensorflow_variant, the one place that decides it).
GPU_ONLY = "@gpu "


def load_allow_list(path: Path = ALLOW_FILE, variant: str | None = None) -> list[re.Pattern[str]]:
    """The allowed stderr patterns: one regular expression a line, ``#`` comments and blanks skipped; a pattern
    after :data:`GPU_ONLY` is kept only when ``variant`` (default: this machine's) is ``"gpu"``.

    Raises:
        ValueError: A pattern that is not a valid regular expression (the line number is given), or a
            pattern without a comment line above it saying where the warning comes from.
    """
    patterns: list[re.Pattern[str]] = []
    commented = False
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line:
            commented = False
            continue
        if line.startswith("#"):
            commented = True
            continue
        if not commented:
            raise ValueError(f"{path}:{number}: every allowed pattern needs a comment above it saying "
                             "where the warning comes from and why it is harmless")
        gpu_only = line.startswith(GPU_ONLY)
        line = line.removeprefix(GPU_ONLY).strip()
        try:
            pattern = re.compile(line)
        except re.error as exc:
            raise ValueError(f"{path}:{number}: not a regular expression ({exc}): {line}") from exc
        if not gpu_only or (variant or _variant()) == "gpu":
            patterns.append(pattern)
    return patterns


def _variant() -> str:
    """This machine's TensorFlow variant, asked once per process."""
    global _machine_variant
    if _machine_variant is None:
        from course_lib.environment.tensorflow_build import tensorflow_variant

        _machine_variant = tensorflow_variant()[0]
    return _machine_variant


_machine_variant: str | None = None


def stderr_errors(text: str, allowed: Iterable[re.Pattern[str]]) -> list[str]:
    """The lines of ``text`` that are errors once the allowed lines are dropped."""
    allowed = list(allowed)
    bad = []
    for line in text.splitlines():
        if any(p.search(line) for p in allowed):
            continue
        if any(p.search(line) for p in ERROR_PATTERNS):
            bad.append(line)
    return bad


def _stderr_of(outputs: Iterable) -> str:
    return "".join(out.get("text", "") for out in outputs
                   if out.get("output_type") == "stream" and out.get("name") == "stderr")


_original_init = nbval.plugin.IPyNbFile.__init__


def _init_without_stderr(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    _original_init(self, *args, **kwargs)
    self.skip_compare = tuple(self.skip_compare) + ("stderr",)


nbval.plugin.IPyNbFile.__init__ = _init_without_stderr

_original_collect = nbval.plugin.IPyNbFile.collect


def _course_root() -> Path:
    """The nearest folder above this file that holds ``tools/maintainers/learner_tail.py`` (the course, or a scratch copy's
    folder that links ``tools/``)."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "tools" / "maintainers" / "learner_tail.py").exists():
            return folder
    raise FileNotFoundError(f"no tools/maintainers/learner_tail.py in a folder above {here}")


def _learner_tail(nb):  # type: ignore[no-untyped-def]
    """tools/maintainers/learner_tail.py's tail of ``nb``; imported only for a notebook with solution cells (a scratch copy of
    this file next to a notebook without them, as tests/test_notebook_stderr.py makes, needs no tools/)."""
    if not any("solution" in cell.get("metadata", {}).get("tags", []) for cell in nb.cells):
        return []
    course = str(_course_root())
    if course not in sys.path:
        sys.path.insert(0, course)
    from tools.maintainers import learner_tail

    return learner_tail.tail(nb)


def _collect_with_the_learner_tail(self):  # type: ignore[no-untyped-def]
    """nbval's cells of the notebook, then its learner tail, run in the same kernel and compared as nbval
    compares the learner edition (a cleared cell has no execution count: it runs without comparison)."""
    yield from _original_collect(self)
    for number, cell in _learner_tail(self.nb):
        options = defaultdict(bool, nbval.plugin.find_metadata_tags(cell.metadata))
        options.update(dict(nbval.plugin.find_comment_markers(cell.source)))
        options.setdefault("check", self.compare_outputs)
        yield nbval.plugin.IPyNbCell.from_parent(self, name=f"Learner cell {number}", cell_num=number, cell=cell,
                                                 options=options)


nbval.plugin.IPyNbFile.collect = _collect_with_the_learner_tail

#: How often a cell's wait checks that the kernel still lives (seconds).
KERNEL_CHECK_S = 5.0
_original_get_message = nbval.kernel.RunningKernel.get_message


def _get_message_watching_the_kernel(self, stream, timeout=None):  # type: ignore[no-untyped-def]
    """nbval's wait for a kernel message, in slices that check the kernel is alive between them.

    nbval waits for a cell's reply up to the cell limit (40 min, pyproject.toml) and never looks at the kernel;
    a kernel killed meanwhile (the out-of-memory killer took one on 2026-11-26) held the session the whole
    40 min. Now the cell fails within ``KERNEL_CHECK_S`` and says why; the limit itself is unchanged.
    """
    if timeout is None or timeout <= KERNEL_CHECK_S:
        return _original_get_message(self, stream, timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return _original_get_message(self, stream, timeout=max(min(KERNEL_CHECK_S, left), 0.01))
        except Empty:
            if left <= KERNEL_CHECK_S:
                raise  # the cell limit: nbval's own handling (interrupt, "Timeout ... exceeded")
            if not self.is_alive():
                raise RuntimeError("the notebook's kernel died while the cell ran (killed: out of memory? "
                                   "see `dmesg`); nbval would have waited for the cell limit") from None


nbval.kernel.RunningKernel.get_message = _get_message_watching_the_kernel


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Mark this process as the notebooks' worker: tests/conftest.py lowers the priority of the other one."""
    if item.path.suffix == ".ipynb":
        os.environ["COURSE_NOTEBOOK_WORKER"] = "1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After a notebook cell ran (and compared equal), fail it on an error line in its stderr."""
    result = yield
    if isinstance(item, nbval.plugin.IPyNbCell):
        bad = stderr_errors(_stderr_of(getattr(item, "test_outputs", ()) or ()), load_allow_list())
        if bad:
            shown = "\n".join(bad[:20]) + (f"\n... and {len(bad) - 20} more" if len(bad) > 20 else "")
            item.raise_cell_error(
                "Cell wrote an error to stderr (allowed warnings are listed in "
                "tests/notebooks/stderr_allow.txt; add one there only with a comment saying where it "
                "comes from and why it is harmless)", "\n" + shown)
    return result


#: Test files that run in the notebooks' unit, after them. ``test_ssh_hosts`` starts tools/localcluster's ssh hosts,
#: whose fixed network namespace names notebook 06 uses too (the first fresh clone run on 2 workers broke both: three
#: failures). ``test_lab`` needs a kernel that starts within JupyterLab's patience: on the test files' worker, whose
#: cgroup weighs 64 against the notebooks' 1024 (tests/conftest.py), a kernel started beside notebook 03's two-rank
#: launches was still not connected after 20 s, the browser declared it dead, and the test failed (a fresh clone on
#: 2026-11-27); after the notebooks it has the machine's full weight and no notebook beside it.
WITH_THE_NOTEBOOKS = ("tests/test_ssh_hosts.py", "tests/browser/test_lab.py")
#: Test files that run in one unit with another file because they share a costly session fixture, which each worker
#: builds once: ``fmnist_tfds`` (tests/conftest.py) prepares Fashion-MNIST for tfds in a fresh folder, 30-50 s on a
#: full machine, and was built on both workers when these two files landed on different ones.
#: The same for ``course_site`` (tests/conftest.py), the course website that tools/site.py builds (~14 CPU-s).
SAME_WORKER_AS = {"tests/test_tfds_cache.py": "tests/test_data.py",
                  "tests/browser/test_site_offline.py": "tests/test_site.py"}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """With ``--dist loadfile``, one test file per worker at a time, but ALL the notebooks as one unit (issue 31).

    The notebooks then run one after another on one worker while the other worker takes the test files: a
    notebook's timing verdicts were shown to hold beside one busy core (``make test-busy``), not beside a second
    notebook that wants both cores too (two at once pushed 04 past its cell limit:
    tools/maintainers/results/2026-11-26-vm-check-time-xdist.md).
    """
    if config.getoption("dist", "no") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class NotebooksTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "notebooks" if path.endswith(".ipynb") or path in WITH_THE_NOTEBOOKS else SAME_WORKER_AS.get(path, path)

    return NotebooksTogether(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    """With ``COURSE_BUSY_NEIGHBOUR=1``, start the busy neighbour (once: in the controller, not per xdist worker)."""
    global _neighbour
    worker = hasattr(session.config, "workerinput")   # not the env variable: a pytest that a worker's test starts has it
    if os.environ.get(BUSY_ENV) == "1" and not worker and _neighbour is None:
        _neighbour = subprocess.Popen([sys.executable, "-c", SPIN])
        print(f"\nbusy neighbour: pid {_neighbour.pid} keeps one core busy until the session ends", flush=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """End the busy neighbour, if this session started one."""
    global _neighbour
    if _neighbour is not None:
        _neighbour.kill()
        _neighbour.wait()
        _neighbour = None
