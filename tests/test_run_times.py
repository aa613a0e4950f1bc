"""Notebook run times have one source, ``docs/run_times.json`` (tools/maintainers/run_times.py; issues 29, 30, 44, 45).

The README's and the instructor guide's tables and each notebook's intro line are generated from it and from the
notebooks' text (the reading-and-doing estimate, tools/maintainers/reading_time.py); these tests fail when one of them
disagrees (a time typed by hand, a notebook's text edited or a notebook re-recorded without regenerating), and
when a README or guide line outside the blocks types a notebook's run time. ``make record`` writes the file
(tests/test_record.py); a development run (``tools/maintainers/run_notebooks.py`` without ``--record``) leaves it alone.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("run_times", ROOT / "tools" / "maintainers" / "run_times.py")
assert spec is not None and spec.loader is not None
run_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_times)

# A notebook's file name, then (in the same sentence) a duration: "04_large_batch ... 246 s", "... two minutes".
NAMED = re.compile(r"\b0\d_[a-z_]+\b")
DURATION = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:s|sec|seconds?|min|minutes?)\b|\b(?:one|two|three|four|five|six|"
                      r"seven|eight|nine|ten|a few)\s+minutes?\b", re.IGNORECASE)


def outside_blocks(text: str) -> str:
    return run_times.BLOCK.sub("", text)


def typed_run_times(text: str) -> list[str]:
    """Sentences outside the generated blocks that name a notebook and a duration."""
    found = []
    for sentence in re.split(r"(?<=[.;])\s+|\n\s*\n|\n(?=\s*[-|*\d])", outside_blocks(text)):
        if NAMED.search(sentence) and DURATION.search(sentence):
            found.append(" ".join(sentence.split()))
    return found


def test_the_generated_blocks_agree_with_the_file() -> None:
    stale = run_times.stale(ROOT)
    assert not stale, f"run-time blocks that disagree with docs/run_times.json: {stale}; " \
                      "run .venv/bin/python tools/maintainers/run_times.py (never type a run time)"


def test_the_readme_and_the_guide_carry_the_table() -> None:
    for doc in run_times.DOCS:
        assert run_times.BLOCK.search((ROOT / doc).read_text()), f"{doc} has no run-times block"


def test_every_recorded_notebook_exists_and_every_time_is_positive() -> None:
    recorded = run_times.load(ROOT)
    assert recorded, "docs/run_times.json records no notebook"
    for name, entry in recorded.items():
        assert (ROOT / "notebooks" / f"{name}.ipynb").exists(), f"run_times.json records a missing notebook {name}"
        assert entry["seconds"] > 0 and re.fullmatch(r"\d{4}-\d\d-\d\d", entry["date"])


@pytest.mark.parametrize("doc", [*run_times.DOCS, *sorted(p.relative_to(ROOT) for p in
                                                         (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))],
                         ids=str)
def test_no_run_time_is_typed_outside_the_blocks(doc: Path) -> None:
    path = ROOT / doc
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown" and "navigation" not in
                           c.metadata.get("tags", []))
    else:
        text = path.read_text()
    typed = typed_run_times(text)
    assert not typed, f"{doc} types a notebook's run time outside the generated block: {typed}"


def test_the_typed_time_scan_can_fail() -> None:
    assert typed_run_times("6. **04_large_batch** — the longest notebook (246 s alone).")
    assert typed_run_times("Run 03_horovod first: it takes about two minutes.")
    assert not typed_run_times("The all-reduce of 05_communication costs 12 ms.")   # no unit of run time
    block = f"{run_times.BEGIN}\n| 04_large_batch | 246 s |\n{run_times.END}"
    assert not typed_run_times(block), "a generated block is not typed"


def _scratch(tmp_path: Path) -> Path:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 00 · Tiny\n\nIntro."), nbformat.v4.new_code_cell("print(1)")]
    nbformat.write(nb, tmp_path / "notebooks" / "00_tiny.ipynb")
    for doc in run_times.DOCS:
        (tmp_path / doc).write_text(f"# Doc\n\n{run_times.BEGIN}\n{run_times.END}\n\nAfter.\n")
    return tmp_path


def test_a_time_typed_into_a_block_is_caught(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    run_times.record("00_tiny", run_times.measured(12.34, source="a log", date="2026-11-25"), root=root)
    assert sorted(run_times.stale(root)) == ["README.md", "docs/instructors.md", "notebooks/00_tiny.ipynb"]
    assert sorted(run_times.apply(root)) == ["README.md", "docs/instructors.md", "notebooks/00_tiny.ipynb"]
    assert run_times.stale(root) == [] and run_times.apply(root) == []
    readme = (root / "README.md").read_text()
    assert "| 00_tiny | about 5 min | 12 s |" in readme and readme.endswith("After.\n")
    (root / "README.md").write_text(readme.replace("| 12 s |", "| 10 s |"))
    assert run_times.stale(root) == ["README.md"]
    nb = nbformat.read(root / "notebooks" / "00_tiny.ipynb", as_version=4)
    assert "run every cell: 12 s" in nb.cells[0].source
    nb.cells[0].source = nb.cells[0].source.replace("12 s", "2 minutes")
    nbformat.write(nb, root / "notebooks" / "00_tiny.ipynb")
    assert run_times.stale(root) == ["README.md", "notebooks/00_tiny.ipynb"]
    run_times.record("00_tiny", run_times.measured(130.0, source="a log", date="2026-11-26"), root=root)  # a new run
    run_times.apply(root)
    assert "| 00_tiny | about 5 min | 130 s (2.2 min) | 2026-11-26, machine not recorded; a log |" in \
        (root / "README.md").read_text()


def test_bad_entries_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="run time must be > 0"):
        run_times.measured(0.0, source="x")
    with pytest.raises(ValueError, match="looks like 04_large_batch"):
        run_times.record("large batch", run_times.measured(1.0, source="x"), root=tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "run_times.json").write_text(json.dumps({"notebooks": {"04_x": {"seconds": -1}}}))
    with pytest.raises(ValueError, match="seconds > 0"):
        run_times.load(tmp_path)


def test_a_doc_without_markers_is_named(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    (root / "README.md").write_text("# no block\n")
    assert "README.md" in run_times.stale(root)
    with pytest.raises(ValueError, match="README.md has no run-times block"):
        run_times.apply(root)


RECORDED = {"seconds": 64.9, "date": "2026-11-28", "recording": "2026-11-28T14:02Z vm",
            "cpu_model": "Intel(R) Xeon(R) Processor", "cores": 2, "gpus": "no GPU", "speed_probe_s": 0.195,
            "python": "3.12.1", "tensorflow": "2.18.1", "horovod": "0.28.1", "load_start": 0.3, "load_end": 1.85,
            "others_cores_mean": 0.02, "others_cores_max_window": 0.2, "own_cpu_s": 120.0, "limits": "x",
            "source": "make record"}


def test_the_blocks_name_the_machine_and_the_reading_estimate(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    run_times.record("00_tiny", dict(RECORDED), root=root)
    run_times.apply(root)
    readme = (root / "README.md").read_text()
    assert ("| 00_tiny | about 5 min | 65 s | recording 2026-11-28T14:02Z vm; load 0.30 → 1.85; other processes "
            "0.02 cores on average |") in readme, readme
    assert "| 00–06 | about 5 min | 65 s | sum of the rows |" in readme, readme
    assert ("Recording 2026-11-28T14:02Z vm ran on: Intel(R) Xeon(R) Processor, 2 CPU cores, no GPU (speed probe "
            "0.195 s); Python 3.12.1, TensorFlow 2.18.1, Horovod 0.28.1.") in readme, readme
    intro = nbformat.read(root / "notebooks" / "00_tiny.ipynb", as_version=4).cells[0].source
    assert ("*Reading and doing: about 5 min (estimated from the text). Machine time to run every cell: 65 s, "
            "measured 2026-11-28 on Intel(R) Xeon(R) Processor, 2 CPU cores, no GPU (speed probe 0.195 s).") in intro
    assert "load" not in intro and "vm" not in intro.split("<!-- run-times:begin")[1], "no load, no host for learners"
    # The estimate follows the text: 2 250 more words are 15 more minutes, and every block is stale until rewritten.
    nb = nbformat.read(root / "notebooks" / "00_tiny.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("word " * 2250))
    nbformat.write(nb, root / "notebooks" / "00_tiny.ipynb")
    assert sorted(run_times.stale(root)) == ["README.md", "docs/instructors.md", "notebooks/00_tiny.ipynb"]
    run_times.apply(root)
    assert "| 00_tiny | about 15 min | 65 s |" in (root / "README.md").read_text()
    assert run_times.apply(root) == [], "the block's own words must not change the estimate it states"


def test_a_notebook_without_an_entry_gets_its_estimate(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    assert sorted(run_times.apply(root)) == ["README.md", "docs/instructors.md", "notebooks/00_tiny.ipynb"]
    assert "| 00_tiny | about 5 min | not recorded yet | run `make record NB=00` |" in (root / "README.md").read_text()
    intro = nbformat.read(root / "notebooks" / "00_tiny.ipynb", as_version=4).cells[0].source
    assert "Reading and doing: about 5 min (estimated from the text). Machine time to run every cell: not " \
           "recorded yet." in intro


def test_a_development_run_leaves_the_record_alone(tmp_path: Path) -> None:
    """tools/maintainers/run_notebooks.py without --record on a scratch course: outputs and the notebook's own block are
    written, docs/run_times.json and the README are not."""
    root = _scratch(tmp_path)
    run_times.record("00_tiny", dict(RECORDED), root=root)
    run_times.apply(root, notebooks_too=False)
    recorded, readme = (root / "docs" / "run_times.json").read_bytes(), (root / "README.md").read_bytes()
    shutil.copytree(ROOT / "tools", root / "tools", ignore=shutil.ignore_patterns("__pycache__", "localcluster"))
    shutil.copytree(ROOT / "course_lib", root / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "tools/maintainers/run_notebooks.py", "notebooks/00_tiny.ipynb"], cwd=root,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "a development run: docs/run_times.json is unchanged" in done.stdout
    nb = nbformat.read(root / "notebooks" / "00_tiny.ipynb", as_version=4)
    assert nb.cells[1].outputs[0]["text"] == "1\n"
    assert "Machine time to run every cell: 65 s" in nb.cells[0].source
    assert (root / "docs" / "run_times.json").read_bytes() == recorded
    assert (root / "README.md").read_bytes() == readme
    check = subprocess.run([sys.executable, "tools/maintainers/run_times.py", "--check"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
