"""Execute the course notebooks in place, so they are committed with the outputs of a real run.

Usage (what ``make notebooks`` runs)::

    .venv/bin/python tools/run_notebooks.py                 # every notebooks/NN_*.ipynb, in order
    .venv/bin/python tools/run_notebooks.py notebooks/02_mirrored_strategy.ipynb

Each notebook is executed top to bottom in a fresh ``python3`` kernel of this environment, with the
notebook's folder as working directory. Cell ids are kept (missing ones get a stable id derived from
the notebook name and position), the kernelspec is set to ``python3``, no timing metadata is stored,
and the file is replaced atomically only when every cell ran without error. The notebook's wall time is then
recorded in ``docs/run_times.json`` (its intro cell gets the run-time line, and the tables in README.md
and docs/instructors.md are regenerated: ``tools/run_times.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_lib.training.files import atomic_write_text  # noqa: E402  (after the path is set)

# tools/run_times.py, loaded by its path (tools/ on sys.path would shadow the standard library's site module)
_spec = importlib.util.spec_from_file_location("run_times", ROOT / "tools" / "run_times.py")
assert _spec is not None and _spec.loader is not None
run_times = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_times)

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def normalise(nb: nbformat.NotebookNode, name: str) -> None:
    """Stable cell ids, python3 kernelspec, no volatile metadata."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)  # widget state is volatile and large; outputs keep their text form
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id")
        if not cell_id or cell_id in seen:
            cell_id = hashlib.sha1(f"{name}:{index}".encode()).hexdigest()[:8]
        cell["id"] = cell_id
        seen.add(cell_id)
        cell.metadata.pop("execution", None)


def execute(path: Path, timeout: int) -> float:
    """Execute one notebook in place; returns its wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    normalise(nb, path.stem)
    start = time.monotonic()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                            record_timing=False, resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    elapsed = time.monotonic() - start
    normalise(nb, path.stem)
    course_notebook = path.resolve().parent == ROOT / "notebooks" and run_times.NOTEBOOK.match(path.stem)
    entry = run_times.measured(elapsed)
    if course_notebook:
        run_times.set_notebook_block(nb, entry)
    nbformat.validate(nb)
    atomic_write_text(path, nbformat.writes(nb) + "\n")
    if course_notebook:
        run_times.record(path.stem, entry, root=ROOT)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: all)")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    total = 0.0
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        elapsed = execute(path, args.timeout)
        total += elapsed
        print(f"  {path.name}: {elapsed:.1f} s", flush=True)
    print(f"{len(paths)} notebook(s) executed in {total:.1f} s")
    for changed in run_times.apply(ROOT):
        print(f"run times: rewrote the generated block of {changed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
