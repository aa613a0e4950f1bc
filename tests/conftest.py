"""Shared fixtures (the real Fashion-MNIST, loaded once per session) and the no-silent-skip rule.

The loaders run with a temporary HOME / TFDS_DATA_DIR (restored right after loading), so the
tests neither depend on nor pollute an existing cache.

No silent skips (issue 20): a test that needs a component says so with
``@pytest.mark.requires("horovodrun")`` (see :data:`COMPONENTS`); a missing component FAILS the
test with the remedy. Any other skip also fails, unless its reason starts with one of
:data:`ALLOWED_SKIPS` (only what this machine cannot have, such as a GPU). To leave a group of
tests out on purpose, deselect it (``make test-unit`` runs ``-m "not horovod and not browser"``):
deselected tests are counted in pytest's summary, never reported as passed.

No leftover processes: every test module, and the session as a whole, must end without leaving an
MPI daemon (orted/prted), an mpirun/horovodrun, a watchdog or a course script running
(:mod:`leftovers`); the check fails naming the module that left them.

Interrupts: the tests that interrupt a launch send this process a real SIGINT, as Jupyter's Interrupt does to
a kernel, and need Python's own handler to turn it into ``KeyboardInterrupt``. A process started in the
background by a non-interactive shell (``make test &``, ``nohup``) inherits SIGINT *ignored*, and Python then
keeps it ignored; the session puts Python's handler back (:func:`pytest_configure`).
"""

from __future__ import annotations

import atexit
import gc
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import leftovers  # noqa: E402  (tests/leftovers.py, next to this file)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# A process that calls hvd.init() without a launcher (in-process tests such as test_accumulation's,
# or a script run with plain `python`) is an MPI "singleton": Open MPI 4 then forks an `orted` daemon
# that lives as long as that process -- for an in-process init, until the end of the whole pytest
# session, which the leftover check below reports. Isolated singletons start no daemon.
os.environ.setdefault("OMPI_MCA_ess_singleton_isolated", "1")
# Every Python this session starts (ranks, kernels, scripts) skips its last garbage collections at exit, about
# 1.4 CPU-s per process that imported TensorFlow (tests/exit_fast/sitecustomize.py); this process does too.
EXIT_FAST = Path(__file__).resolve().parent / "exit_fast"
if str(EXIT_FAST) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXIT_FAST), os.environ.get("PYTHONPATH", "")]))
    atexit.register(gc.freeze)


def _load(source: str, home) -> object:
    from course_lib.training import data

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))  # keras keeps its cache in ~/.keras: it takes no folder
        return data.load_arrays(source, data_dir=home / "tensorflow_datasets")


@pytest.fixture(scope="session")
def fmnist(tmp_path_factory):
    """The full real Fashion-MNIST via the keras loader (IDX order), from a fresh cache."""
    return _load("keras", tmp_path_factory.mktemp("keras_home"))


@pytest.fixture(scope="session")
def tfds_home(tmp_path_factory):
    """A fresh HOME whose ``tensorflow_datasets`` folder the ``fmnist_tfds`` load prepared."""
    return tmp_path_factory.mktemp("tfds_home")


@pytest.fixture(scope="session")
def fmnist_tfds(tfds_home):
    """The full real Fashion-MNIST via tfds, prepared (~10-30 s) in a fresh data_dir."""
    return _load("tfds", tfds_home)


@pytest.fixture(scope="session")
def course_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course website built once per session by ``make site``'s command (tools/site.py --out) in a scratch
    folder, read-only for its users: tests/test_site.py reads the HTML, tests/browser/test_site_offline.py serves
    it to Chromium (one xdist worker runs both: SAME_WORKER_AS in tests/notebooks/harness.py; issue 31)."""
    import subprocess

    dest = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "site.py"), "--out", str(dest)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dest


@pytest.fixture(scope="session")
def small_fmnist(fmnist):
    """The first 2 000 training and 500 test examples of the real data."""
    from course_lib.training.data import FashionMNIST

    return FashionMNIST(fmnist.x_train[:2000], fmnist.y_train[:2000],
                        fmnist.x_test[:500], fmnist.y_test[:500])


# ----------------------------------------------------------------- no silent skips
#: Skip reasons that do not fail the run: things a correctly set-up machine may lack. Each needs a
#: CPU run of the same code path elsewhere (mixed precision: tests/test_gpu_paths_on_cpu.py).
ALLOWED_SKIPS: tuple[str, ...] = ("needs a GPU",)


def _horovodrun_found() -> bool:
    return (Path(sys.executable).parent / "horovodrun").exists() or shutil.which("horovodrun") is not None


#: Components a test may require: (is it there?, remedy printed when it is not).
COMPONENTS: dict[str, tuple[Callable[[], bool], str]] = {
    "horovodrun": (_horovodrun_found,
                   "horovodrun is not installed next to this Python: run `make setup` "
                   "(COURSE_FORCE_SETUP=1 make setup rebuilds Horovod)"),
    "horovod": (lambda: importlib.util.find_spec("horovod") is not None,
                "the horovod package is not importable: run `make setup`"),
    "frameworks-venv": (lambda: _frameworks_python() is not None,
                        "notebook 07's venv (.venv-07: torch, jax, keras 3) is missing: run `make setup`"),
}


def _frameworks_python() -> str | None:
    from course_lib.environment.frameworks import frameworks_python

    return frameworks_python(required=False)


def pytest_configure(config: pytest.Config) -> None:
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # inherited from a background start: see above
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line("markers", "requires(*components): the test fails (never skips) with the "
                            "remedy when a component is missing; components: " + ", ".join(COMPONENTS))


#: What runs long, in the order it should start when pytest-xdist's workers share the files out (`make test`,
#: ``--dist loadfile --no-loadscope-reorder``): a long file started last would leave one worker alone at the end.
#: Notebooks first, by their recorded run times (docs/run_times.json); then the files with real clusters,
#: browsers or Horovod launches; then the rest, in collection order.
LONG_FIRST = ("cluster", "browser", "horovod")


def _start_rank(item: pytest.Item, notebook_seconds: dict[str, float]) -> float:
    path = item.path
    if path.suffix == ".ipynb":
        return -1e6 - notebook_seconds.get(path.stem, 0.0)
    for rank, mark in enumerate(LONG_FIRST):
        if item.get_closest_marker(mark) is not None or mark in path.parts:
            return float(rank)
    return float(len(LONG_FIRST))


def _notebook_seconds() -> dict[str, float]:
    try:
        recorded = json.loads((ROOT / "docs" / "run_times.json").read_text())["notebooks"]
        return {name: float(entry["seconds"]) for name, entry in recorded.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long files first (see LONG_FIRST); a file's items stay together and in their order.

    (``--dist loadgroup`` would let a test leave its file's unit, but pytest-xdist 3.8 cannot rename a test's node
    id under pytest 9, so its groups are ignored: ``make test`` uses ``--dist loadfile``.)
    """
    seconds = _notebook_seconds()
    file_rank: dict[Path, float] = {}
    for item in items:
        file_rank[item.path] = min(file_rank.get(item.path, float("inf")), _start_rank(item, seconds))
    position = {path: index for index, path in enumerate(dict.fromkeys(item.path for item in items))}
    items.sort(key=lambda item: (file_rank[item.path], position[item.path]))


#: Niceness that a pytest-xdist worker takes when its first item is a test file's while the session holds the
#: notebooks (``make test``): the other worker runs the notebooks, whose timing verdicts then see an almost quiet
#: machine (a niced process gets about a tenth of a contended core), while this one uses the CPU they leave idle.
#: Each worker's runs also take their slots from a folder of their own (``$COURSE_SLOTS_DIR``, set when the worker's
#: session starts, before the test modules that copy ``os.environ`` are imported), so that the test files' runs do
#: not make the notebooks' launches queue (a test's one-worker run held a notebook's two-worker launch for minutes
#: in the first fresh clone run on two workers).
TEST_WORKER_NICE = 10
#: Set by tests/notebooks/harness.py in the worker that runs a notebook cell; that worker keeps its priority.
NOTEBOOK_WORKER_ENV = "COURSE_NOTEBOOK_WORKER"


def _yield_to_the_notebooks(item: pytest.Item) -> None:
    if "niced" in _SESSION or not hasattr(item.config, "workerinput"):   # an xdist worker (not a pytest it started)
        return
    _SESSION["niced"] = os.environ.get(NOTEBOOK_WORKER_ENV) != "1" and any(
        other.path.suffix == ".ipynb" for other in item.session.items)
    if _SESSION["niced"]:
        os.nice(TEST_WORKER_NICE)
        _SESSION["cgroup"] = _into_a_light_cgroup()


#: The CPU weight of a cgroup that the test-file worker moves into where it can (root, cgroup v1's cpu controller at
#: :data:`CPU_CGROUP`; the root group's processes weigh 1024). Nice alone does not reach the Horovod ranks: each
#: starts a session of its own, and the kernel weighs sessions as equals (autogroup); a cgroup holds every process
#: started from it (probed: tools/maintainers/results/2026-11-26-vm-check-time-two-workers.md).
TEST_WORKER_SHARES = 64
CPU_CGROUP = Path("/sys/fs/cgroup/cpu")


def _into_a_light_cgroup() -> str:
    """Move this worker (and every process it starts from now on) into a new cgroup of low CPU weight.

    Returns:
        The cgroup's folder, or "" where there is none to make (not root, no cgroup v1 cpu controller).
    """
    if not (CPU_CGROUP / "cpu.shares").is_file() or not os.access(CPU_CGROUP, os.W_OK):
        return ""
    group = CPU_CGROUP / f"course-tests-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cpu.shares").write_text(str(TEST_WORKER_SHARES))
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        _leave_the_cgroup(str(group))
        return ""
    return str(group)


def _leave_the_cgroup(group: str) -> None:
    """Move this process back to the root group and remove ``group`` (left if a process still runs in it)."""
    try:
        (CPU_CGROUP / "cgroup.procs").write_text(str(os.getpid()))
        Path(group).rmdir()
    except OSError:
        pass


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail, with the remedy, a test whose required component is missing; under xdist, let the notebooks go
    first (:data:`TEST_WORKER_NICE`)."""
    _yield_to_the_notebooks(item)
    for mark in item.iter_markers("requires"):
        for name in mark.args:
            if name not in COMPONENTS:
                pytest.fail(f"unknown component {name!r} in @pytest.mark.requires; known: "
                            f"{', '.join(COMPONENTS)}", pytrace=False)
            present, remedy = COMPONENTS[name]
            if not present():
                pytest.fail(f"required component missing: {remedy}", pytrace=False)


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason text of a skipped report ("" when pytest recorded none)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def _fail_unless_allowed(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if reason.startswith(ALLOWED_SKIPS):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped without an allowed reason: {reason!r}. In `make test` a missing "
                       "component is a failure: install it (`make setup`), or deselect the tests on "
                       "purpose (-m / --deselect). Allowed skip reasons (tests/conftest.py "
                       f"ALLOWED_SKIPS): {', '.join(ALLOWED_SKIPS)}.")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Turn a test's skip into a failure unless its reason is allowed."""
    report = yield
    _fail_unless_allowed(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Turn a skipped module (``pytest.importorskip``, ``allow_module_level``) into a failure too."""
    report = yield
    _fail_unless_allowed(report)
    return report


# ----------------------------------------------------------------- no leftover processes
_SESSION: dict[str, object] = {}


def _session_start() -> None:
    if "before" not in _SESSION:
        _SESSION["marker"] = leftovers.session_marker()
        _SESSION["before"] = leftovers.snapshot()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Mark this session's processes (an environment variable its children inherit) and note
    which launch-related processes were already running; in a pytest-xdist worker, take a slot folder of its own."""
    _session_start()
    if hasattr(session.config, "workerinput"):
        folder = tempfile.mkdtemp(prefix=f"course-slots-{session.config.workerinput['workerid']}-")
        os.environ["COURSE_SLOTS_DIR"] = _SESSION["slots_dir"] = folder


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the module that leaves an MPI daemon, a launcher, a watchdog or a course script
    running (only this session's processes count; the machine is shared)."""
    _session_start()
    before = leftovers.snapshot()
    yield
    found = leftovers.new_since(before, str(_SESSION["marker"]))
    ours = [item for item in found if item.ours]
    for item in found:
        if not item.ours:
            warnings.warn(pytest.PytestWarning(
                f"{request.module.__name__}: an orphaned MPI daemon of unknown origin appeared "
                f"(not marked as this session's; maybe another run on this machine): "
                f"{item.describe()}"), stacklevel=1)
    if ours:
        pytest.fail(f"{request.module.__name__} left {len(ours)} process(es) running: "
                    + "; ".join(item.describe() for item in ours)
                    + ". Every launch must end all its processes (runner.procs.watchdog / "
                    "processes.terminate); find the test that started them.", pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session if any of its launch-related processes is still alive at its end."""
    if "slots_dir" in _SESSION:
        shutil.rmtree(str(_SESSION.pop("slots_dir")), ignore_errors=True)
    if _SESSION.get("cgroup"):
        _leave_the_cgroup(str(_SESSION.pop("cgroup")))
    if "before" not in _SESSION:
        return
    found = [item for item in leftovers.new_since(_SESSION["before"], str(_SESSION["marker"]),  # type: ignore[arg-type]
                                                   settle_s=5.0) if item.ours]
    if found:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = ("the test session left process(es) running: "
                   + "; ".join(item.describe() for item in found))
        if reporter is not None:
            reporter.write_line("LEFTOVER PROCESSES: " + message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
