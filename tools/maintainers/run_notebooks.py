"""Execute the course notebooks in place: ``make record`` records them for the course; ``make notebooks`` is a
development run.

Usage::

    make record                    # = .venv/bin/python tools/maintainers/run_notebooks.py --record   (every notebook, in order)
    make record NB=05              # = ... --record 05    (NB takes numbers or paths: NB="03 05")
    .venv/bin/python tools/maintainers/run_notebooks.py notebooks/02_mirrored_strategy.ipynb      # a development run

Each notebook is executed alone, top to bottom, in a fresh ``python3`` kernel of this environment, with the
notebook's folder as working directory. Cell ids are kept (missing ones get a stable id derived from the notebook
name and position), the kernelspec is set to ``python3``, no timing metadata is stored, and the file is replaced
atomically only when every cell ran without error; its intro cell's generated line (reading-and-doing estimate,
machine time: tools/maintainers/run_times.py) is refreshed.

**A recording** (``--record``, what the committed course holds) also watches the machine while each notebook
runs (tools/maintainers/record_watch.py) and REFUSES to write the notebook (its file stays as it was; exit status 3; one
message says why and what to do) when, during its run, other processes used more CPU than the limits allow
(0.10 cores on average over the run, 0.5 over any 20 s: docs/recording.md), another course run held a slot, a
launch of the notebook waited in the slot queue or a cell printed a queue line, or the notebook's first output
line is not its ``machine:`` stamp (course_lib.environment.machine.stamp). A notebook that passes gets its stamp
completed with the load at its end and the recording's id (``…; load 1.85 at end; recording 2026-11-28T14:02Z
host``; one id for every notebook of the run), and its entry in ``docs/run_times.json`` (time and machine facts,
read from that stamp); the README's and the instructor guide's tables are regenerated at the end. The first
refused notebook stops the run; the message gives the command that continues the same recording
(``--recording ID``, accepted only on the machine and software that recording began on).

**A development run** (no ``--record``) refuses nothing and leaves ``docs/run_times.json`` alone: the outputs it
writes are interim, and tests/test_recording.py fails until the notebooks are recorded again.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from course_lib.environment.machine import complete_stamp, load_average, parse_stamp  # noqa: E402
from course_lib.training.files import atomic_write_text  # noqa: E402  (after the path is set)


def _tool(name: str) -> ModuleType:
    """A module of tools/, loaded by its path (tools/ on sys.path would shadow the standard library's site)."""
    spec = importlib.util.spec_from_file_location(f"course_tools_{name}", ROOT / "tools" / "maintainers" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    if spec.name not in sys.modules:
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


run_times = _tool("run_times")
recording_tools = _tool("recording")
Refused = recording_tools.Refused

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
REFUSED = 3   # the exit status of a refused recording (1: a cell failed)


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


def resolve(names: list[str], root: Path = ROOT) -> list[Path]:
    """Notebook paths from paths or numbers (``05`` -> notebooks/05_*.ipynb); every notebook when empty."""
    if not names:
        return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    paths = []
    for name in names:
        found = sorted((root / "notebooks").glob(f"{name}_*.ipynb")) if name.isdigit() else [Path(name)]
        if len(found) != 1 or not found[0].is_file():
            raise SystemExit(f"no notebook {name!r}: give a number (NB=05) or a path (notebooks/05_x.ipynb)")
        paths.append(found[0])
    return paths


def execute(path: Path, timeout: int, watch: Any = None) -> tuple[nbformat.NotebookNode, float, Any]:
    """Execute one notebook (not written); returns it, its wall time and the watch's report (or None)."""
    nb = nbformat.read(path, as_version=4)
    normalise(nb, path.stem)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                            record_timing=False, resources={"metadata": {"path": str(path.parent)}})
    stopper = _tool("record_watch").Stopper(watch) if watch is not None else None
    if watch is not None:
        watch.on_refusal = stopper
        watch.start()
    start = time.monotonic()
    try:
        client.execute()
    except Exception:
        if stopper is None or not stopper.reason:
            raise
    finally:
        elapsed = time.monotonic() - start
        if stopper is not None:
            stopper.done.set()
        report = watch.stop() if watch is not None else None
    normalise(nb, path.stem)
    return nb, elapsed, report


def write(path: Path, nb: nbformat.NotebookNode, entry: dict[str, Any] | None) -> None:
    """Refresh the intro cell's generated line and replace the file atomically."""
    if path.resolve().parent == (ROOT / "notebooks").resolve() and run_times.NOTEBOOK.match(path.stem):
        run_times.set_notebook_block(nb, entry)
    nbformat.validate(nb)
    atomic_write_text(path, nbformat.writes(nb) + "\n")


def record(path: Path, recording: str, limits: Any, timeout: int, watch_options: dict[str, Any],
           first: dict[str, Any] | None) -> tuple[float, dict[str, Any]]:
    """Record one notebook or raise :class:`Refused`; returns its wall time and stamp facts."""
    record_watch = _tool("record_watch")
    watch = record_watch.Watch(limits, **watch_options)
    nb, elapsed, report = execute(path, timeout, watch)
    reasons = report.reasons()
    reasons += [f"a cell printed a slot-queue line: {line!r}" for line in recording_tools.queue_lines(nb)]
    remedies = [f"record on a quiet machine: stop the other work ({limits.describe()}; `top` and the slot "
                "holders named above show it) and wait for other course runs to end"] if reasons else []
    try:
        output, facts = recording_tools.stamp_output(nb)
    except Refused as no_stamp:
        if not report.reasons():   # a notebook stopped early has no complete outputs to judge
            reasons += no_stamp.reasons
            remedies.append(no_stamp.remedy)
    if reasons:
        raise Refused(reasons, "; ".join(remedies))
    if first is not None and recording_tools.differences(facts, first):
        raise Refused([f"its machine differs from the recording's: {', '.join(recording_tools.differences(facts, first))}"],
                      "start a new recording of every notebook: make record")
    load = load_average()
    line, rest = output["text"].split("\n", 1) if "\n" in output["text"] else (output["text"], "")
    output["text"] = complete_stamp(line, load_end=load[0] if load else None, recording=recording) + "\n" + rest
    facts = parse_stamp(output["text"].split("\n", 1)[0])
    assert facts is not None
    entry = run_times.recorded(elapsed, facts, recording=recording, quiet=report.as_entry(),
                               limits=limits.describe())
    write(path, nb, entry)
    run_times.record(path.stem, entry, root=ROOT)
    print(f"  recorded in {elapsed:.1f} s; other processes {report.others_mean_cores:.2f} cores on average, "
          f"{report.others_max_window_cores:.2f} at most over {limits.window_s:.0f} s", flush=True)
    return elapsed, facts


def refusal_message(path: Path, refused: Any, rest: list[Path], recording: str, started: bool) -> str:
    """The one message of a refusal: which notebook, why, what to do, and the command that goes on."""
    lines = [f"REFUSED: {path.name} was not recorded (its file is unchanged; nothing was written for it)."]
    lines += [f"  - {reason}" for reason in refused.reasons]
    lines.append(f"What to do: {refused.remedy}.")
    names = " ".join(p.name[:2] for p in rest)
    if started:
        lines.append(f'Then continue this recording: make record NB="{names}" RECORDING="{recording}"')
    else:
        lines.append(f'Then record again: make record NB="{names}"')
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to run, as numbers (05) or paths (default: all)")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed per cell")
    parser.add_argument("--record", action="store_true", help="record (make record): refuse disturbed runs, "
                        "complete the stamps, write docs/run_times.json")
    parser.add_argument("--recording", default="", help="continue this recording (its id, as a refusal names it)")
    for flag, field in (("--others-mean", "mean_cores"), ("--others-window", "window_cores"),
                        ("--window-s", "window_s"), ("--sample-s", "sample_s")):
        parser.add_argument(flag, type=float, dest=field,
                            help="for tests of the recorder only (the course's recording keeps the defaults)")
    parser.add_argument("--machine-tree", type=int, default=0, help=argparse.SUPPRESS)  # tests: a private machine
    args = parser.parse_args(argv)
    paths = resolve(args.notebooks)
    if not args.record:
        return develop(paths, args.timeout)
    record_watch = _tool("record_watch")
    limits = record_watch.Limits(**{field: getattr(args, field) for field in
                                    ("mean_cores", "window_cores", "window_s", "sample_s")
                                    if getattr(args, field) is not None})
    options: dict[str, Any] = {}
    if args.machine_tree:
        options["machine_cpu"] = lambda: record_watch.tree_cpu_seconds(args.machine_tree)
    recording = args.recording or recording_tools.recording_id()
    print(f"recording {recording}: {len(paths)} notebook(s), each alone; {limits.describe()}", flush=True)
    first: dict[str, Any] | None = None
    done = 0
    try:
        if args.recording:
            recording_tools.check_continuation(recording, [entry for entry in run_times.load(ROOT).values()
                                                           if entry.get("recording") == recording])
            first = recording_tools.this_machine()
        for index, path in enumerate(paths):
            print(f"recording {path.name} ...", flush=True)
            try:
                _, facts = record(path, recording, limits, args.timeout, options, first)
            except Refused as refused:
                print(refusal_message(path, refused, paths[index:], recording,
                                      started=index > 0 or bool(args.recording)), file=sys.stderr)
                return REFUSED
            first, done = first or facts, done + 1
    except Refused as refused:
        print("REFUSED: " + "; ".join(refused.reasons) + f".\nWhat to do: {refused.remedy}.", file=sys.stderr)
        return REFUSED
    finally:
        # the recorded notebooks have their blocks already; a refused one stays as it was
        for changed in run_times.apply(ROOT, notebooks_too=False) if done else []:
            print(f"run times: rewrote the generated block of {changed}")
    print(f"recording {recording}: {len(paths)} notebook(s) recorded")
    return 0


def develop(paths: list[Path], timeout: int) -> int:
    """A development run: execute and write, refuse nothing, leave docs/run_times.json alone."""
    recorded = run_times.load(ROOT)
    total = 0.0
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        nb, elapsed, _ = execute(path, timeout)
        write(path, nb, recorded.get(path.stem))
        total += elapsed
        print(f"  {path.name}: {elapsed:.1f} s", flush=True)
    print(f"{len(paths)} notebook(s) executed in {total:.1f} s (a development run: docs/run_times.json is "
          "unchanged; `make record` records the course)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
