"""Write assessment/source/ddp/assessment.ipynb, the assessment's source notebook in nbgrader's layout.

Description: one place for the notebook's cells and their nbgrader metadata (grade ids and points from
``course_lib.assessment.spec.POINTS``); the code cell's starter is ``assessment/starter_tape_fmnist.py``.
Re-run after changing either; tests/test_assessment.py fails when the committed notebook differs from what this
writes.

How to run::

    .venv/bin/python instructor/assessment/make_notebook.py
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from course_lib.assessment import spec  # noqa: E402
from course_lib.assessment.concepts import QUESTIONS  # noqa: E402

OUT = ROOT / "assessment" / "source" / "ddp" / "assessment.ipynb"
STARTER = ROOT / "assessment" / "starter_tape_fmnist.py"


def meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False) -> dict:
    """nbgrader's cell metadata (schema 3)."""
    data = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if grade:
        data["points"] = spec.POINTS[grade_id]
    return {"nbgrader": data}


def md(text: str, grade_id: str | None = None, **kind: bool) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(text.strip())
    if grade_id:
        cell.metadata = meta(grade_id, **kind)
    else:  # plain text: no nbgrader metadata, a stable id from its words
        cell["id"] = "md-" + hashlib.sha1(text.encode()).hexdigest()[:8]
    return cell


def code(text: str, grade_id: str, **kind: bool) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(text.strip())
    cell.metadata = meta(grade_id, **kind)
    return cell


def script_cell(starter: str) -> nbformat.NotebookNode:
    """The code task's cell: an ordinary cell (nbgrader would replace a whole solution cell without markers by its
    stub), so the learner's edit is kept as it is and graded by the launch that follows it."""
    cell = nbformat.v4.new_code_cell("%%writefile tape_fmnist.py\n" + starter.strip())
    cell["id"] = "code-script"
    return cell


def test(grade_id: str, body: str) -> nbformat.NotebookNode:
    return code(f"# {grade_id}: {spec.POINTS[grade_id]} points (hidden tests: the grader runs them)\n"
                f"### BEGIN HIDDEN TESTS\n{body.strip()}\n### END HIDDEN TESTS", grade_id, grade=True, locked=True)


def cells() -> list[nbformat.NotebookNode]:
    total, auto = sum(spec.POINTS.values()), sum(spec.AUTOGRADED.values())
    code_points = sum(v for k, v in spec.POINTS.items() if k.startswith("code_"))
    measure_points = sum(v for k, v in spec.POINTS.items() if k.startswith("measure_"))
    concept_points = sum(v for k, v in spec.POINTS.items() if k.startswith("concept_"))
    starter = STARTER.read_text()
    found = [
        md(f"""
# Assessment: data-parallel training with Horovod

About an hour's work. Show that you can make a training loop data-parallel, measure what distributing it costs,
and reason about the arithmetic of data-parallel training.

| part | points | graded how |
|---|---|---|
| 1. code: a `GradientTape` loop made data-parallel | {code_points} | your script launched at {spec.WORKERS} workers by the grader |
| 2. measure: a distribution efficiency with its interval and verdict | {measure_points} | recomputed by the grader from your own run records |
| 3. concepts: four numeric questions | {concept_points} | within each question's stated tolerance |
| 4. one written answer | {spec.POINTS['written_answer']} | by your instructor, with a rubric |

**Total {total} points; the pass mark is {spec.PASS_MARK}.** Points are given per graded cell (partial credit per
part). Retakes are allowed: submit again (in a room) or run `make assess` again (self-paced); the last submission
counts. Self-paced, the written answer is not scored: you pass with {round(spec.PASS_MARK * auto / total)} of the
{auto} autograded points.
"""),
        md("## Setup"),
        code("from pathlib import Path\n\nimport course_lib\nfrom course_lib.environment import machine\n\n"
             "COURSE = Path(course_lib.__file__).resolve().parents[1]  # the course folder: source_code/ is there\n"
             "print(machine.stamp())", "setup", locked=True),
        md(f"""
## Part 1: code ({code_points} points)

The cell below writes `tape_fmnist.py`: the course CNN trained on Fashion-MNIST by a custom `tf.GradientTape` loop,
on ONE worker. It uses the course's data reader and report helpers, so its run prints the JSON lines the grader
reads. Make it data-parallel with Horovod's TensorFlow API (`horovod.tensorflow`): join the workers, read one
shard per worker, average the gradients with `hvd.DistributedGradientTape`, broadcast rank 0's weights and optimizer
state after the first step, scale the learning rate by the course's rule
(`course_lib.training.schedules.scaled_lr`), and save checkpoints on rank 0 only. Every place to change says
`TODO(Horovod)`.

The grader launches your script with `course_lib.runner.launch.run_horovod` at {spec.WORKERS} workers and checks:
identical weights on every rank and one shard's steps per epoch ({spec.POINTS['code_weights']}), every training
image exactly once per epoch ({spec.POINTS['code_coverage']}), checkpoints by rank 0 only, the last one holding
the final weights ({spec.POINTS['code_checkpoints']}), the rate scaled by the course's rule
({spec.POINTS['code_lr_rule']}), test accuracy at least the reference solution's lowest over its pilot seeds minus
{spec.ACCURACY_MARGIN} ({spec.POINTS['code_accuracy']}), the run within {spec.TIME_MULTIPLE:g} times the
solution's time on this machine ({spec.POINTS['code_time']}; the last two count only for a data-parallel run).
"""),
        script_cell(starter),
        code("from course_lib.assessment.code import assert_part, grade_code\n\n"
             "graded = grade_code(\"tape_fmnist.py\")  # launches it at 2 workers, as the grader does\n"
             "print(graded.summary())", "code_launch", locked=True),
        test("code_weights", 'assert_part(graded, "code_weights")'),
        test("code_coverage", 'assert_part(graded, "code_coverage")'),
        test("code_checkpoints", 'assert_part(graded, "code_checkpoints")'),
        test("code_lr_rule", 'assert_part(graded, "code_lr_rule")'),
        test("code_accuracy", 'assert_part(graded, "code_accuracy")'),
        test("code_time", 'assert_part(graded, "code_time")'),
        md(f"""
## Part 2: measure ({measure_points} points)

Launch, in 2 or more alternating rounds (`course_lib.lessons.common.paired_runs.round_order`), a {spec.WORKERS}-worker
Horovod run of `source_code/horovod_fmnist.py` (`run_horovod`) and its bound (`course_lib.runner.multiworker.run_bound`,
the same arguments and workers), with `--json`, `--epochs 2` (the first epoch is warm-up), a per-worker batch of
64 and a training subset of 4096. Save the launches with
`course_lib.assessment.measure.save_rounds("measure_runs.json", [(run, bound), ...])`, compute the distribution
efficiency with `launch_ratio` and print it with `efficiency_line` (notebooks 02 and 03).

Then set `MEASURE_MEAN` and `MEASURE_CI95` (the efficiency and its 95 % half-width, to 2 decimals or better:
{spec.POINTS['measure_efficiency']} points) and `MEASURE_VERDICT`: is the efficiency at least 0.8 here? `"True"`,
`"False"` or `"cannot tell"` ({spec.POINTS['measure_verdict']} points). The grader recomputes all three from
`measure_runs.json`: any machine's numbers are right if they follow from your runs.
"""),
        code("from course_lib.assessment.measure import EFFICIENCY_GOAL, save_rounds\n"
             "from course_lib.lessons.common.efficiency import efficiency_line\n"
             "from course_lib.lessons.common.paired_runs import launch_ratio, round_order\n"
             "from course_lib.runner.multiworker import run_bound\n"
             "from course_lib.runner.launch import run_horovod\n\n"
             "SCRIPT = COURSE / \"source_code\" / \"horovod_fmnist.py\"\n"
             "ARGS = [\"--json\", \"--epochs\", \"2\", \"--batch-size\", \"64\", \"--train-subset\", \"4096\", "
             "\"--test-subset\", \"512\"]\n"
             "### BEGIN SOLUTION\n"
             "rounds = []\n"
             "for index in range(2):\n"
             "    launched = {}\n"
             "    for variant in round_order([\"run\", \"bound\"], index):\n"
             "        launcher = run_horovod if variant == \"run\" else run_bound\n"
             "        launched[variant] = launcher(SCRIPT, ARGS, workers=2, timeout=600, output=lambda line: None)\n"
             "    rounds.append((launched[\"run\"], launched[\"bound\"]))\n"
             "save_rounds(\"measure_runs.json\", rounds)\n"
             "ratio = launch_ratio(rounds)\n"
             "print(efficiency_line(\"Horovod, 2 workers\", ratio))\n"
             "### END SOLUTION", "measure_runs", solution=True),
        code("### BEGIN SOLUTION\n"
             "MEASURE_MEAN, MEASURE_CI95 = ratio.mean, ratio.ci95\n"
             "MEASURE_VERDICT = ratio.at_least(EFFICIENCY_GOAL)\n"
             "### END SOLUTION\n"
             "print(MEASURE_MEAN, MEASURE_CI95, MEASURE_VERDICT)", "measure_answer", solution=True),
        test("measure_efficiency", "from course_lib.assessment.code import assert_part\n"
             "from course_lib.assessment.measure import grade_measure\n\n"
             "measured = grade_measure(\"measure_runs.json\", MEASURE_MEAN, MEASURE_CI95, MEASURE_VERDICT)\n"
             "assert_part(measured, \"measure_efficiency\")"),
        test("measure_verdict", "from course_lib.assessment.code import assert_part\n"
             "from course_lib.assessment.measure import grade_measure\n\n"
             "measured = grade_measure(\"measure_runs.json\", MEASURE_MEAN, MEASURE_CI95, MEASURE_VERDICT)\n"
             "assert_part(measured, \"measure_verdict\")"),
        md(f"## Part 3: concepts ({concept_points} points)\n\nEach answer is a number; the question states its "
           "tolerance."),
    ]
    answers = {"concept_steps": "118", "concept_epochs": "12", "concept_global_batch": "1024",
               "concept_allreduce_bytes": "7_200_000"}
    for name, question in QUESTIONS.items():
        variable = "ANSWER_" + name.removeprefix("concept_").upper()
        found.append(md(f"**{name} ({spec.POINTS[name]} points).** {question.text}"))
        found.append(code(f"### BEGIN SOLUTION\n{variable} = {answers[name]}\n### END SOLUTION",
                          name.replace("concept_", "answer_"), solution=True))
        found.append(test(name, "from course_lib.assessment.code import assert_part\n"
                                "from course_lib.assessment.concepts import grade_concept\n\n"
                                f"assert_part(grade_concept(\"{name}\", {variable}), \"{name}\")"))
    found += [
        md(f"""
## Part 4: one written answer ({spec.POINTS['written_answer']} points, graded by your instructor)

Your run in Part 2 did not reach its bound exactly (or you could not tell). In 4 to 8 sentences: what does a
Horovod worker spend time on that a copy of the bound never does, which of those costs you expect to dominate on
the machine you measured on (say why, from what the course measured), and one measurement you would make to
confirm it (what you would launch and what number would settle it).
"""),
        md("### BEGIN SOLUTION\nSee instructor/assessment/rubric.md for a full-marks answer.\n### END SOLUTION",
           "written_answer", grade=True, solution=True),
        md("""
## Submitting

In a room: save, then **Submit** in the Assignments tab (you may submit again; the last submission counts).
Self-paced: save, then `make assess` in the course folder grades this notebook with the same tests.
"""),
    ]
    return found


def build() -> nbformat.NotebookNode:
    """The source notebook, cell ids stable (their grade ids)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = cells()
    for cell in nb.cells:
        if "nbgrader" in cell.metadata:
            cell["id"] = cell.metadata["nbgrader"]["grade_id"].replace("_", "-")
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(build(), OUT)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
