"""Prove the test suite bites: apply named mutants to a scratch copy and run the tests that must kill them.

Usage::

    .venv/bin/python tools/maintainers/mutants.py                  # every mutant; writes docs/mutants.md
    .venv/bin/python tools/maintainers/mutants.py --only ring_traffic_x3 --no-write
    .venv/bin/python tools/maintainers/mutants.py --list

Each mutant replaces one exact snippet of one file (it must occur exactly once, so a refactoring
that moves the code makes the tool fail loudly instead of testing nothing). The course is copied to
a temporary folder (without .venv, .git and run artefacts), the mutant is applied there, and the
named fast tests run with this venv's Python on the copy (``PYTHONPATH`` puts the copy's
``course_lib`` first; the run checks that it does). A mutant is *killed* when those tests fail;
one that survives makes the exit status 1. ``tests/test_mutants.py`` checks every mutant still
applies and runs one end to end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "mutants.md"
IGNORE = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".mypy_cache", ".pytest_cache", "runs",
                                "artifacts", "*.egg-info", "build")


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: replace ``old`` by ``new`` in ``path``; ``tests`` must then fail."""

    name: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS: tuple[Mutant, ...] = (
    Mutant("placement_by_local_rank", "a rank takes the share of its local rank, as the classic idiom does",
           "course_lib/training/machine/placement.py",
           "                return offset + int(local)",
           "                return int(local)",
           ("tests/test_capacity.py",)),
    Mutant("gpu_ranks_share_a_gpu", "a GPU run may put more ranks than GPUs (NCCL refuses two on one GPU)",
           "course_lib/runner/slots.py",
           "    if cap.kind == \"gpu\" and wanted > cap.slots:",
           "    if False:",
           ("tests/test_capacity.py",)),
    Mutant("staleness_x7", "async staleness 7 times too large",
           "course_lib/lessons/data_parallelism/concepts.py",
           "staleness = sum(r * (total_rate - r) * t for r, t in zip(async_rates, times)) / total_rate",
           "staleness = 7 * sum(r * (total_rate - r) * t for r, t in zip(async_rates, times)) / total_rate",
           ("tests/test_concepts.py", "tests/test_mutant_guards.py")),
    Mutant("ring_traffic_x3", "ring all-reduce traffic 3 times too large",
           "course_lib/lessons/common/ring.py",
           "    return 2 * (int(workers) - 1) / int(workers)",
           "    return 6 * (int(workers) - 1) / int(workers)",
           ("tests/test_concepts.py", "tests/test_mutant_guards.py", "tests/test_exercises.py")),
    Mutant("throughput_dataset_length", "Throughput counts the dataset length, not the steps that ran",
           "course_lib/training/throughput.py",
           "samples = min(samples, self.samples_per_epoch)",
           "samples = self.samples_per_epoch",
           ("tests/test_callbacks.py", "tests/test_exercises.py")),
    Mutant("rerun_keeps_disturbed", "a re-run round replaces a disturbed one even when it is disturbed too",
           "course_lib/lessons/data_parallelism/experiments.py",
           "        if not disturbed(fresh):",
           "        if True:",
           ("tests/test_experiments.py",)),
    Mutant("nbval_waits_on_a_dead_kernel", "a killed kernel holds nbval until the cell limit",
           "tests/notebooks/harness.py",
           "nbval.kernel.RunningKernel.get_message = _get_message_watching_the_kernel",
           "pass  # the wait is nbval's own again",
           ("tests/test_notebook_stderr.py::test_a_dead_kernel_fails_the_cell_at_once",)),
    Mutant("every_worker_shard_0", "every worker reads shard 0",
           "course_lib/training/pipeline.py",
           "return perm[worker_index::num_workers]",
           "return perm[0::num_workers]",
           ("tests/test_data.py::test_shards_cover_every_example_once",
            "tests/test_coverage.py::test_real_pipeline_shards_pass")),
    Mutant("accumulation_ignored", "the script applies every micro-batch instead of accumulating k of them",
           "source_code/horovod_fmnist.py",
           "    if k > 1:  # Horovod (4/5) with accumulation",
           "    if False:  # Horovod (4/5) with accumulation",
           ("tests/test_scripts.py::test_accumulation_changes_the_weights_every_kth_micro_step",)),
    Mutant("corrupted_pixel", "the loader hands over one flipped pixel",
           "course_lib/training/data.py",
           "    data, verified = loaders[source](folder)\n",
           "    data, verified = loaders[source](folder)\n    data = data._replace(x_train=data.x_train.copy())\n"
           "    data.x_train[0, 14, 14] ^= 1\n",
           ("tests/test_data.py::test_keras_loader_counts_and_idx_order",)),
    Mutant("verification_off", "loaded arrays are no longer checked against the sha256",
           "course_lib/training/data.py",
           "    _check_content(data, source, data_dir)\n",
           "    pass  # _check_content(data, source, data_dir)\n",
           ("tests/test_data.py::test_keras_cache_with_one_flipped_pixel_is_refused",)),
    Mutant("checker_near_miss", "a self-check accepts a 0.9 % error",
           "course_lib/lessons/common/answers.py",
           "def _close(expected: float, rel: float = 1e-3)",
           "def _close(expected: float, rel: float = 1e-2)",
           ("tests/test_exercises.py", "tests/test_mutant_guards.py")),
    Mutant("stderr_unchecked", "notebook cells with a traceback on stderr pass",
           "tests/notebooks/harness.py",
           "        if bad:\n",
           "        if False:\n",
           ("tests/test_notebook_stderr.py",)),
    Mutant("skips_allowed", "a skipped test no longer fails the run",
           "tests/conftest.py",
           '    report.outcome = "failed"\n',
           '    return\n',
           ("tests/test_skip_policy.py",)),
)


def check_applicable(mutant: Mutant, root: Path = ROOT) -> None:
    """Raise ValueError unless ``mutant.old`` occurs exactly once in its file (and the tests exist)."""
    text = (root / mutant.path).read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise ValueError(f"mutant {mutant.name}: the snippet occurs {count} times in {mutant.path} "
                         f"(expected once); update tools/maintainers/mutants.py: {mutant.old!r}")
    for test in mutant.tests:
        if not (root / test.split("::")[0]).is_file():
            raise ValueError(f"mutant {mutant.name}: test file {test} does not exist")


def run_mutant(mutant: Mutant, *, python: str = sys.executable, timeout: float = 1800) -> dict:
    """Apply ``mutant`` to a scratch copy and run its tests.

    Returns:
        ``{"name", "killed" (tests failed), "returncode", "seconds", "tail" (last output lines)}``.
    """
    check_applicable(mutant)
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        copy = Path(tmp) / "course"
        shutil.copytree(ROOT, copy, ignore=IGNORE)
        target = copy / mutant.path
        target.write_text(target.read_text().replace(mutant.old, mutant.new))
        env = {**os.environ, "PYTHONPATH": str(copy), "TF_CPP_MIN_LOG_LEVEL": "2"}
        probe = subprocess.run([python, "-c", "import course_lib; print(course_lib.__file__)"],
                               capture_output=True, text=True, cwd=copy, env=env, timeout=120)
        if not probe.stdout.strip().startswith(str(copy)):
            raise RuntimeError(f"the scratch copy's course_lib is not the one imported: {probe.stdout}"
                               f"{probe.stderr}")
        start = time.monotonic()
        proc = subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x",
                               *mutant.tests], capture_output=True, text=True, cwd=copy, env=env,
                              timeout=timeout, start_new_session=True)
        seconds = time.monotonic() - start
    tail = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))][:3]
    killed = proc.returncode not in (0, 5)
    return {"name": mutant.name, "killed": killed, "returncode": proc.returncode,
            "seconds": round(seconds, 1), "tail": tail or proc.stdout.splitlines()[-1:]}


def table(mutants: list[Mutant], results: list[dict]) -> str:
    """The Markdown table of docs/mutants.md."""
    lines = ["| mutant | what it breaks | file | tests run | verdict | killed by |",
             "|---|---|---|---|---|---|"]
    for mutant, result in zip(mutants, results):
        verdict = "killed" if result["killed"] else "**SURVIVED**"
        killer = "; ".join(t.replace("|", "\\|") for t in result["tail"]) or "—"
        lines.append(f"| `{mutant.name}` | {mutant.what} | `{mutant.path}` | "
                     f"{', '.join(f'`{t}`' for t in mutant.tests)} | {verdict} "
                     f"({result['seconds']:.0f} s) | {killer} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    by_name = {m.name: m for m in MUTANTS}
    if args.list:
        for m in MUTANTS:
            print(f"{m.name}: {m.what} ({m.path}) -> {', '.join(m.tests)}")
        return 0
    unknown = sorted(set(args.only or ()) - set(by_name))
    if unknown:
        parser.error(f"unknown mutant(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    chosen = [by_name[n] for n in args.only] if args.only else list(MUTANTS)
    for mutant in chosen:
        check_applicable(mutant)
    results = []
    for mutant in chosen:
        result = run_mutant(mutant)
        print(f"{mutant.name}: {'killed' if result['killed'] else 'SURVIVED'} "
              f"({result['seconds']:.0f} s) {' | '.join(result['tail'])}", flush=True)
        results.append(result)
    text = table(chosen, results)
    if not args.no_write:
        RESULTS.write_text(
            "# Mutants: which check kills which deliberate bug\n\n"
            "Written by `.venv/bin/python tools/maintainers/mutants.py` (issue 20, point 9). Each mutant is applied "
            "to a scratch copy of the course; the tests listed must then fail. The last column names "
            "the first failing test.\n\n" + text + "\n")
    print(text)
    return 0 if all(r["killed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
