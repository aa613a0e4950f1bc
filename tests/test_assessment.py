"""The graded assessment (issue 55): its notebook, its grader's parts, and that every part can fail.

The grader is judged on runs built here from the course's own shard arithmetic (every part's right case and a
planted mistake for each); the real launches of the reference solution and of the learner's starter are in
tests/test_assessment_launch.py.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from course_lib.assessment import code, concepts, measure, spec
from course_lib.assessment.release import release, graded_copy
from course_lib.training.consumption import summarize_ids, ids_hash
from course_lib.training.pipeline import epoch_indices
from course_lib.training.schedules import scaled_lr

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assessment" / "source" / "ddp" / "assessment.ipynb"
NBGRADER_RELEASE = ROOT / "assessment" / "checks" / "nbgrader_release.ipynb"  # outside tests/: not linted


def _nbg(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


# --- the notebook -----------------------------------------------------------------------------------------------
def test_committed_notebook_is_what_make_notebook_writes() -> None:
    import importlib.util

    spec_ = importlib.util.spec_from_file_location("make_notebook", ROOT / "instructor/assessment/make_notebook.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    built, committed = module.build(), nbformat.read(SOURCE, as_version=4)
    assert [(c.get("id"), c.source, c.metadata) for c in built.cells] == \
        [(c.get("id"), c.source, c.metadata) for c in committed.cells], "run instructor/assessment/make_notebook.py"


def test_points_per_cell_are_the_specs_and_total_100_with_a_pass_mark() -> None:
    nb = nbformat.read(SOURCE, as_version=4)
    graded = {_nbg(c)["grade_id"]: _nbg(c)["points"] for c in nb.cells if _nbg(c).get("grade")}
    assert graded == spec.POINTS
    assert sum(graded.values()) == 100 and 0 < spec.PASS_MARK < 100
    assert f"Total 100 points; the pass mark is {spec.PASS_MARK}" in nb.cells[0].source
    ids = [_nbg(c)["grade_id"] for c in nb.cells if _nbg(c)]
    assert len(ids) == len(set(ids))


def test_release_is_what_nbgrader_releases() -> None:
    """assessment/checks/nbgrader_release.ipynb is nbgrader 0.9.6's ``generate_assignment`` of the source
    (regenerate: classroom/README.md, "Assessment"); our release (learner edition) must equal it cell by cell."""
    ours, theirs = release(nbformat.read(SOURCE, as_version=4)), nbformat.read(NBGRADER_RELEASE, as_version=4)
    assert [c.source.strip() for c in ours.cells] == [c.source.strip() for c in theirs.cells]


def test_release_hides_tests_and_solutions_and_the_test_copy_keeps_only_the_tests() -> None:
    source = nbformat.read(SOURCE, as_version=4)
    released, tests = release(source), graded_copy(source)
    assert not any("assert_part(" in c.source for c in released.cells if _nbg(c).get("grade"))
    assert sum("assert_part(" in c.source for c in tests.cells) == len(spec.AUTOGRADED)
    for nb in (released, tests):
        text = "\n".join(c.source for c in nb.cells)
        assert "BEGIN SOLUTION" not in text and "= 118" not in text and "7_200_000" not in text
        assert "ratio.at_least(EFFICIENCY_GOAL)" not in text


# --- concepts -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, right, wrong", [
    ("concept_steps", 118, 469), ("concept_steps", 118, 117), ("concept_epochs", 12, 3),
    ("concept_global_batch", 1024, 512), ("concept_allreduce_bytes", 7_200_000, 4_800_000),
    ("concept_allreduce_bytes", 7_200_000, 9_600_000)])
def test_concepts_accept_the_answer_and_name_the_misconception(name: str, right: float, wrong: float) -> None:
    assert concepts.grade_concept(name, right).passed
    missed = concepts.grade_concept(name, wrong)
    assert not missed.passed and missed.points == 0 and "tolerance" not in missed.reason


def test_concept_tolerances_are_the_stated_ones() -> None:
    assert concepts.grade_concept("concept_allreduce_bytes", 7_200_000 * 1.0099).passed
    assert not concepts.grade_concept("concept_allreduce_bytes", 7_200_000 * 1.0101).passed
    assert "within 1 %" in concepts.QUESTIONS["concept_allreduce_bytes"].text
    assert not concepts.grade_concept("concept_steps", 118.5).passed
    assert not concepts.grade_concept("concept_steps", None).passed
    assert not concepts.grade_concept("concept_steps", True).passed


# --- the code task's grader, on runs built from the course's shard arithmetic -------------------------------------
TRAIN, EPOCHS, WORKERS, SEED = 6000, 2, 2, spec.GRADE_SEED


def _good_run(tmp_path: Path) -> SimpleNamespace:
    """The events a correct 2-worker run prints (what tape_fmnist_solution.py prints), and its checkpoint folder."""
    lr = scaled_lr("adam", 0.001, WORKERS)
    steps = math.ceil(TRAIN / WORKERS / 64)
    events = [(0, {"event": "config", "workers": 2, "train_size": TRAIN, "lr": lr, "strategy": "horovod"})]
    for epoch in range(EPOCHS):
        for rank in range(WORKERS):
            ids = epoch_indices(TRAIN, seed=SEED, epoch=epoch, num_workers=WORKERS, worker_index=rank)
            events.append((rank, {"event": "consumed", "rank": rank, "epoch": epoch + 1, **summarize_ids(ids),
                                  "padding": 0, "padding_hash": ids_hash([])}))
            events.append((rank, {"event": "lr", "rank": rank, "epoch": epoch + 1, "lr": lr}))
        events.append((0, {"event": "checkpoint", "epoch": epoch + 1, "digest": f"d{epoch + 1}"}))
    events += [(rank, {"event": "digest", "rank": rank, "digest": "d2"}) for rank in range(WORKERS)]
    (tmp_path / "latest.json").write_text(json.dumps({"epoch": EPOCHS, "digest": "d2"}))
    log = [f"[0]<stdout>:{steps}/{steps} - 3s - loss: 0.5"] * EPOCHS
    return SimpleNamespace(events=events, digests={0: "d2", 1: "d2"}, result={"test_accuracy": 0.86},
                           log=log, command=["python", "tape_fmnist.py", *spec.SCRIPT_ARGS])


def _grade(run: SimpleNamespace, folder: Path, launch_s: float = 60.0) -> code.CodeGrade:
    return code.grade_run(run, folder, threshold=0.8, time_limit_s=300.0, launch_s=launch_s)


def test_a_correct_run_gets_every_code_point(tmp_path: Path) -> None:
    grade = _grade(_good_run(tmp_path), tmp_path)
    assert all(p.passed for p in grade.parts.values()), grade.summary()
    assert sum(p.points for p in grade.parts.values()) == 40


def _digests_differ(run, folder):
    run.digests = {0: "d2", 1: "other"}
    run.events = [(r, {**e, "digest": "other"} if e["event"] == "digest" and r == 1 else e) for r, e in run.events]


def _one_shard_for_both(run, folder):  # both ranks read the whole set: every image twice, and 2x the steps
    run.events = [(r, e) for r, e in run.events if e["event"] != "consumed"]
    for epoch in range(EPOCHS):
        ids = epoch_indices(TRAIN, seed=SEED, epoch=epoch)
        run.events += [(r, {"event": "consumed", "rank": r, "epoch": epoch + 1, **summarize_ids(ids), "padding": 0})
                       for r in range(WORKERS)]


def _rank1_saves_too(run, folder):
    run.events.append((1, {"event": "checkpoint", "epoch": 1, "digest": "d1"}))


def _last_checkpoint_stale(run, folder):
    (folder / "latest.json").write_text(json.dumps({"epoch": 1, "digest": "d1"}))


def _lr_not_scaled(run, folder):
    run.events = [(r, {**e, "lr": 0.001} if e["event"] == "lr" else e) for r, e in run.events]


def _lr_scaled_linearly_for_adam(run, folder):
    run.events = [(r, {**e, "lr": 0.002} if e["event"] == "lr" else e) for r, e in run.events]


def _low_accuracy(run, folder):
    run.result = {"test_accuracy": 0.79}


@pytest.mark.parametrize("mistake, part", [
    (_digests_differ, "code_weights"), (_one_shard_for_both, "code_coverage"), (_rank1_saves_too, "code_checkpoints"),
    (_last_checkpoint_stale, "code_checkpoints"), (_lr_not_scaled, "code_lr_rule"),
    (_lr_scaled_linearly_for_adam, "code_lr_rule"), (_low_accuracy, "code_accuracy")])
def test_each_planted_mistake_loses_its_part(tmp_path: Path, mistake, part: str) -> None:
    run = _good_run(tmp_path)
    mistake(run, tmp_path)
    grade = _grade(run, tmp_path)
    assert not grade.parts[part].passed and grade.parts[part].reason
    assert grade.parts[part].points == 0


def _one_process_prints_both_ranks(run, folder):
    """A single process (tagged rank 0 by the launcher) prints every rank's lines: text shaped like rank 1's."""
    run.events = [(0, e) for _, e in run.events]


@pytest.mark.parametrize("trust", [True, False])
def test_lines_printed_for_another_rank_do_not_count(tmp_path: Path, trust: bool, monkeypatch) -> None:
    run = _good_run(tmp_path)
    _one_process_prints_both_ranks(run, tmp_path)
    if not trust:  # without the filter the spoofed lines pass: this is what trusted() is for
        monkeypatch.setattr(code, "trusted", lambda r: r)
    grade = _grade(run, tmp_path)
    failed = {n for n, p in grade.parts.items() if not p.passed}
    if trust:
        assert {"code_weights", "code_coverage", "code_lr_rule"} <= failed
    else:  # the weights and the coverage read the ranks the lines claim
        assert not {"code_weights", "code_coverage"} & failed


def test_over_the_time_limit_loses_the_time_part_only(tmp_path: Path) -> None:
    grade = _grade(_good_run(tmp_path), tmp_path, launch_s=301.0)
    assert [n for n, p in grade.parts.items() if not p.passed] == ["code_time"]


def test_accuracy_and_time_count_only_for_a_data_parallel_run(tmp_path: Path) -> None:
    run = _good_run(tmp_path)
    _digests_differ(run, tmp_path)
    grade = _grade(run, tmp_path)
    assert not grade.parts["code_accuracy"].passed and not grade.parts["code_time"].passed
    assert "data-parallel" in grade.parts["code_accuracy"].reason


def test_pilot_threshold_and_time_limit() -> None:
    pilot = spec.load_pilot()
    assert len(pilot.accuracies) >= 10
    assert pilot.threshold == int((min(pilot.accuracies) - spec.ACCURACY_MARGIN) * 1000) / 1000
    slow = spec.time_limit_s(pilot, pilot.speed_probe_s * 2)
    assert slow == pytest.approx(max(spec.MIN_TIME_S, 2 * spec.TIME_MULTIPLE * max(pilot.launch_s)))
    assert spec.time_limit_s(pilot, pilot.speed_probe_s / 100) == spec.MIN_TIME_S


# --- the measure task ---------------------------------------------------------------------------------------------
def _launch(rates: list[float], copies: int = 0) -> dict:
    """A launch's record: a Horovod run (copies=0: rank 0 reports for all) or a bound of ``copies`` copies."""
    config = {"event": "config", "strategy": "horovod", "workers": 2, "per_worker_batch": 64, "steps_per_epoch": 32}
    ranks = range(copies) if copies else [0]
    events = []
    for rank in ranks:
        events.append([rank, {**config, "workers": 1} if copies else config])
        events.append([rank, {"event": "epoch", "warmup": True, "images_per_sec": 1.0}])
        events += [[rank, {"event": "epoch", "images_per_sec": r / max(copies, 1)}] for r in rates]
    return {"command": [], "events": events}


def _records(tmp_path: Path, pairs: list[tuple[float, float]], copies: int = 2) -> Path:
    path = tmp_path / "measure_runs.json"
    path.write_text(json.dumps({"rounds": [{"run": _launch([a]), "bound": _launch([b], copies)} for a, b in pairs]}))
    return path


def test_measure_accepts_the_recomputed_numbers_and_verdict(tmp_path: Path) -> None:
    path = _records(tmp_path, [(900, 1000), (880, 1000), (910, 1000)])
    ratio, problems = measure.recompute(path)
    assert not problems and ratio.at_least(0.8) == "True"
    parts = measure.grade_measure(path, round(ratio.mean, 2), round(ratio.ci95, 2), "True")
    assert all(p.passed for p in parts.values())
    parts = measure.grade_measure(path, ratio.mean + 0.02, ratio.ci95, "False")
    assert not any(p.passed for p in parts.values())


def test_cannot_tell_is_right_exactly_when_the_interval_contains_the_goal(tmp_path: Path) -> None:
    wide = _records(tmp_path, [(600, 1000), (1000, 1000)])
    ratio, _ = measure.recompute(wide)
    assert ratio.mean - ratio.ci95 < 0.8 < ratio.mean + ratio.ci95
    assert measure.grade_measure(wide, ratio.mean, ratio.ci95, "cannot tell")["measure_verdict"].passed
    assert not measure.grade_measure(wide, ratio.mean, ratio.ci95, "True")["measure_verdict"].passed
    narrow = _records(tmp_path, [(900, 1000), (905, 1000)])
    ratio, _ = measure.recompute(narrow)
    assert not measure.grade_measure(narrow, ratio.mean, ratio.ci95, "cannot tell")["measure_verdict"].passed


@pytest.mark.parametrize("pairs, copies, why", [
    ([(900, 1000)], 2, "at least 2"), ([(900, 1000), (880, 1000)], 1, "copies [0]")])
def test_measure_refuses_records_that_are_not_the_task(tmp_path: Path, pairs, copies: int, why: str) -> None:
    path = _records(tmp_path, pairs, copies)
    parts = measure.grade_measure(path, 0.9, 0.1, "True")
    assert not any(p.passed for p in parts.values()) and why in parts["measure_efficiency"].reason


def test_missing_records_lose_the_part_with_a_reason(tmp_path: Path) -> None:
    parts = measure.grade_measure(tmp_path / "none.json", 0.9, 0.1, "True")
    assert "save_rounds" in parts["measure_efficiency"].reason


def test_assert_part_raises_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code.assert_part(concepts.grade_concept("concept_epochs", 12), "concept_epochs")
    assert "concept_epochs: 5/5" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="dividing epochs"):
        code.assert_part(concepts.grade_concept("concept_epochs", 3), "concept_epochs")


def test_rubric_has_partial_credit_and_sums_to_the_written_points() -> None:
    text = (ROOT / "instructor" / "assessment" / "rubric.md").read_text()
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| ") and line.split("|")[2].strip().isdigit()]
    assert sum(int(r[2]) for r in rows) == spec.POINTS["written_answer"]
    assert "half marks" in text and "## Instructors only" in text
    assert hashlib.sha256(text.encode()).hexdigest()  # read, not empty


def test_outputs_are_cut_at_the_limit() -> None:
    from course_lib.assessment.run_notebook import cap_outputs

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * 5000),
                    nbformat.v4.new_output("stream", name="stdout", text="z" * 5000)]
    small = nbformat.v4.new_code_cell("print")
    small.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ok")]
    nb.cells = [cell, small]
    assert cap_outputs(nb, 6000) == 1
    assert sum(len(o["text"]) for o in cell.outputs[:-1]) == 6000 and "output cut" in cell.outputs[-1]["text"]
    assert small.outputs[0]["text"] == "ok"
    nbformat.validate(nb)
