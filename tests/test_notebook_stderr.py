"""tests/notebooks/harness.py fails a notebook cell whose stderr holds an error (issue 20, point 5).

Unit tests of the line filter, and one real nbval run on scratch notebooks: a traceback on stderr
fails its cell although the cell raised nothing; an allowed warning and a plain warning pass; a kernel
killed mid-cell fails its cell at once.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import nbformat
import pytest
from nested_pytest import copy_notebook_harness

ROOT = Path(__file__).resolve().parents[1]
CONFTEST = ROOT / "tests" / "notebooks" / "harness.py"


def _conftest():
    spec = importlib.util.spec_from_file_location("notebooks_conftest_under_test", CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nbc = _conftest()
ALLOWED = nbc.load_allow_list(variant="cpu")       # a CPU machine's list (tensorflow-cpu)
ALLOWED_GPU = nbc.load_allow_list(variant="gpu")   # a GPU machine's (tensorflow[and-cuda]): the @gpu entries too
CUDNN = ("2026-01-01 12:00:00.123456: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] "
         "Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has "
         "already been registered")
CUINIT = ("2026-01-01 12:00:00.123456: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:152] failed "
          "call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)")
DT_HALF = ("2026-01-01 12:00:00.123456: E tensorflow/core/util/util.cc:131] oneDNN supports DT_HALF only on "
           "platforms with AVX-512. Falling back to the default Eigen-based implementation if present.")


@pytest.mark.parametrize("line", [
    "Traceback (most recent call last):",
    "[1]<stderr>:Traceback (most recent call last):",
    "E0000 00:00:1700000000.000000  4242 gloo_context.cc:12] connection refused",
    "2026-01-01 12:00:00.123456: E tensorflow/core/framework/op_kernel.cc:1827] OP_REQUIRES failed",
    "2026-01-01 12:00:00.123456: F tensorflow/core/platform/cpu_feature_guard.cc:1] fatal",
    "ERROR:absl:Failed to load dataset info",
    "CRITICAL:root:out of memory",
    "tensorflow_datasets.core.registered.DatasetNotFoundError: Dataset fashion_mnist not found.",
    "[0]<stderr>:ValueError: bad shape",
    CUDNN,            # the CUDA-capable wheel on a CPU machine (issue 44): set-up installs tensorflow-cpu there
    "[1]<stderr>:" + CUINIT,
])
def test_error_lines_are_caught(line: str) -> None:
    assert nbc.stderr_errors(f"a harmless line\n{line}\n", ALLOWED) == [line]


@pytest.mark.parametrize("line", [
    DT_HALF,
    "2026-01-01 12:00:00.123456: W tensorflow/core/framework/local_rendezvous.cc:404] aborting",
    "WARNING:tensorflow:Callback method `on_train_batch_end` is slow",
    "/x/keras/src/engine/training.py:3103: UserWarning: You are saving your model as an HDF5 file",
    "Dl Completed...: 100%|##########| 4/4 [00:00<00:00, 12.10 file/s]",
    "Error bars show the 95 % interval",  # an English sentence is no error line
])
def test_warnings_and_allowed_lines_pass(line: str) -> None:
    assert nbc.stderr_errors(line + "\n", ALLOWED) == []
    assert nbc.stderr_errors(line + "\n", ALLOWED_GPU) == []


@pytest.mark.parametrize("line", [CUDNN, CUINIT.replace("UNKNOWN ERROR (303)", "CUDA_ERROR_NO_DEVICE")])
def test_the_cuda_builds_start_up_lines_pass_on_gpu_machines_only(line: str) -> None:
    assert nbc.stderr_errors(line + "\n", ALLOWED_GPU) == []
    assert nbc.stderr_errors(line + "\n", ALLOWED) == [line]


def test_gpu_only_entries_follow_this_machines_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``variant`` the list asks course_lib.environment.tensorflow_build (COURSE_GPU forces it), and an
    @gpu pattern is checked as a regular expression on every machine."""
    allow = tmp_path / "allow.txt"
    allow.write_text("# everywhere\nplain\n\n# on GPU machines only\n@gpu gpu-only\n")
    for forced, expected in (("0", ["plain"]), ("1", ["plain", "gpu-only"])):
        monkeypatch.setenv("COURSE_GPU", forced)
        monkeypatch.setattr(nbc, "_machine_variant", None)
        assert [p.pattern for p in nbc.load_allow_list(allow)] == expected
    allow.write_text("# on GPU machines only\n@gpu (unclosed\n")
    with pytest.raises(ValueError, match="not a regular expression"):
        nbc.load_allow_list(allow, variant="cpu")


def test_allow_list_entries_are_commented_and_valid(tmp_path: Path) -> None:
    assert ALLOWED, "tests/notebooks/stderr_allow.txt holds no pattern"
    uncommented = tmp_path / "allow.txt"
    uncommented.write_text("# a comment\nfirst\n\nsecond without comment\n")
    with pytest.raises(ValueError, match=r"allow.txt:4: every allowed pattern needs a comment"):
        nbc.load_allow_list(uncommented)
    broken = tmp_path / "broken.txt"
    broken.write_text("# where it comes from\n(unclosed\n")
    with pytest.raises(ValueError, match="not a regular expression"):
        nbc.load_allow_list(broken)


def _notebook(path: Path, sources: list[str], stdout: list[str]) -> None:
    """A notebook whose stored outputs hold each cell's stdout only (stderr is not compared)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    for count, (source, out) in enumerate(zip(sources, stdout), start=1):
        cell = nbformat.v4.new_code_cell(source, execution_count=count)
        if out:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out)]
        nb.cells.append(cell)
    nbformat.write(nb, path)


@dataclass
class NbvalSession:
    """One nbval run: its exit status, its output, and each cell's outcome and duration (from its JUnit XML)."""

    returncode: int
    out: str
    outcomes: dict[str, str]
    seconds: dict[str, float]


@pytest.fixture(scope="module")
def nbval_session(tmp_path_factory: pytest.TempPathFactory) -> NbvalSession:
    """ONE strict nbval run (a pytest start with nbval costs seconds of CPU) on the scratch notebooks of both slow
    tests below, with tests/notebooks/harness.py and its allow list copied beside them, as the course runs them."""
    folder = tmp_path_factory.mktemp("nbval-stderr")
    write = "import sys\nprint('step done')\n_ = sys.stderr.write({!r})"
    _notebook(folder / "bad.ipynb",
              [write.format("[1]<stderr>:Traceback (most recent call last):\n[1]<stderr>:  File \"x.py\"\n"
                            "[1]<stderr>:RuntimeError: rank 1 died\n"), "print('after')"],
              ["step done\n", "after\n"])
    _notebook(folder / "good.ipynb",
              [write.format(DT_HALF + "\n"), write.format("WARNING:tensorflow:a harmless warning\n")],
              ["step done\n", "step done\n"])
    _notebook(folder / "killed.ipynb", ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"], [""])
    copy_notebook_harness(folder)
    (folder / "pytest.ini").write_text("[pytest]\n")
    junit = folder / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "--nbval-cell-timeout",
                           "120", "-p", "no:cacheprovider", "-rA", f"--junitxml={junit}", "-c", str(folder / "pytest.ini"),
                           "--rootdir", str(folder), *(str(folder / name) for name in
                                                       ("bad.ipynb", "good.ipynb", "killed.ipynb"))],
                          capture_output=True, text=True, timeout=600, cwd=folder)
    out = proc.stdout + proc.stderr
    outcomes = {cell: status for status, cell in re.findall(r"^(PASSED|FAILED) (\S+::Cell \d+)", out, re.M)}
    seconds = {}
    if junit.is_file():
        for case in ElementTree.parse(junit).iter("testcase"):
            seconds[f"{case.get('classname')}::{case.get('name')}"] = float(case.get("time", "nan"))  # killed.ipynb
    return NbvalSession(proc.returncode, out, outcomes, seconds)


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_nbval_fails_a_cell_with_a_traceback_on_stderr(nbval_session: NbvalSession) -> None:
    out = nbval_session.out
    outcomes = {cell: status for cell, status in nbval_session.outcomes.items() if not cell.startswith("killed")}
    assert outcomes == {"bad.ipynb::Cell 0": "FAILED", "bad.ipynb::Cell 1": "PASSED",
                        "good.ipynb::Cell 0": "PASSED", "good.ipynb::Cell 1": "PASSED"}, out
    assert "Cell wrote an error to stderr" in out and "RuntimeError: rank 1 died" in out
    assert nbval_session.returncode == 1, out


class _FakeKernel:
    """What nbval's ``RunningKernel.get_message`` touches: ``kc`` and ``is_alive``."""

    def __init__(self, alive: bool, messages: tuple = ()) -> None:
        import types
        self.alive, self.messages, self.asked = alive, list(messages), []
        self.kc = types.SimpleNamespace(get_shell_msg=self._get, get_iopub_msg=self._get)

    def _get(self, timeout: float) -> dict:
        import queue
        import time
        self.asked.append(timeout)
        if self.messages:
            return self.messages.pop(0)
        time.sleep(timeout)
        raise queue.Empty

    def is_alive(self) -> bool:
        return self.alive


def test_a_dead_kernel_fails_the_cell_at_once(monkeypatch):
    import time

    import nbval.kernel
    assert nbval.kernel.RunningKernel.get_message.__name__ == "_get_message_watching_the_kernel", "not installed"
    monkeypatch.setattr(nbc, "KERNEL_CHECK_S", 0.05)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="kernel died"):
        nbc._get_message_watching_the_kernel(_FakeKernel(alive=False), "shell", timeout=30)
    assert time.monotonic() - started < 2   # not the 30 s limit


def test_a_live_kernel_waits_for_the_limit_then_nbval_handles_it(monkeypatch):
    import queue
    import time
    monkeypatch.setattr(nbc, "KERNEL_CHECK_S", 0.05)
    kernel = _FakeKernel(alive=True)
    started = time.monotonic()
    with pytest.raises(queue.Empty):   # nbval's own timeout path (interrupt, "Timeout ... exceeded")
        nbc._get_message_watching_the_kernel(kernel, "iopub", timeout=0.4)
    assert 0.35 < time.monotonic() - started < 2 and len(kernel.asked) >= 4


def test_messages_pass_through_unchanged(monkeypatch):
    monkeypatch.setattr(nbc, "KERNEL_CHECK_S", 0.05)
    reply = {"parent_header": {"msg_id": "m"}, "content": {"status": "ok"}}
    assert nbc._get_message_watching_the_kernel(_FakeKernel(True, (reply,)), "shell", timeout=30) is reply
    blocking = _FakeKernel(True, (reply,))
    assert nbc._get_message_watching_the_kernel(blocking, "shell", timeout=None) is reply
    assert blocking.asked == [None]   # no limit: nbval's call as it was


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_nbval_fails_fast_when_the_kernel_is_killed(nbval_session: NbvalSession) -> None:
    """A kernel killed by SIGKILL mid-cell (as the out-of-memory killer does) fails that cell in seconds."""
    out = nbval_session.out
    assert nbval_session.outcomes.get("killed.ipynb::Cell 0") == "FAILED" and "kernel died while the cell ran" in out, out
    seconds = nbval_session.seconds.get("killed.ipynb::Cell 0")
    assert seconds is not None, f"no duration of killed.ipynb::Cell 0 in the JUnit XML: {nbval_session.seconds}"
    assert seconds < 60, f"waited {seconds:.0f} s: the cell limit (120 s), not the kernel's death"
