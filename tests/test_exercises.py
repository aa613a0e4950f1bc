"""The notebooks' self-check cells tell right from wrong."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from course_lib.lessons.exercises import EXERCISES, check

SOLUTIONS_FILE = Path(__file__).resolve().parents[1] / "instructor" / "solutions" / "answers.py"
spec = importlib.util.spec_from_file_location("answers", SOLUTIONS_FILE)
answers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(answers)


def test_every_exercise_has_a_solution_and_wrong_answers() -> None:
    assert set(answers.SOLUTIONS) == set(EXERCISES)
    assert set(answers.WRONG) == set(EXERCISES)


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_self_check_accepts_the_solution(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(key, answers.SOLUTIONS[key]) is True
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_self_check_rejects_wrong_answers(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    for wrong in answers.WRONG[key] + ["not a number"]:
        assert check(key, wrong) is False
        assert "Hint:" in capsys.readouterr().out


def test_unanswered_and_unknown() -> None:
    assert check("00.steps", None) is False
    with pytest.raises(KeyError, match="known:"):
        check("99.nothing", 1)


# --- the coding exercise of 03: turn the plain Keras script into a Horovod script ------------------
ROOT = Path(__file__).resolve().parents[1]
SOLUTION_SCRIPT = ROOT / "source_code" / "horovod_fmnist_minimal.py"   # named in instructor/solutions/answers.py
PLAIN_SCRIPT = ROOT / "source_code" / "keras_fmnist.py"
TINY = ["--epochs", "1", "--train-subset", "512", "--test-subset", "256", "--batch-size", "64"]


def _attempt(tmp_path: Path, name: str, source: Path, edits: dict[str, str]) -> Path:
    text = source.read_text()
    for old, new in edits.items():
        assert old in text, f"{source.name} changed: cannot make the attempt {name!r} ({old!r} not found)"
        text = text.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def _run(script: Path):
    import psutil

    from course_lib.runner import launch

    result = launch.run_horovod(script, 2, TINY, timeout=300, show="all", output=lambda line: None,
                                cwd=ROOT, check=False)
    alive = [pid for pid in result.pids if psutil.pid_exists(pid)
             and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"the run left processes behind: {alive}"
    return result


def test_the_solutions_file_names_the_coding_exercise_solution() -> None:
    assert answers.CODING["03.horovod_script"] == "source_code/horovod_fmnist_minimal.py"
    assert (ROOT / answers.CODING["03.horovod_script"]).is_file()


@pytest.mark.horovod
def test_coding_self_check_accepts_the_solution(capsys: pytest.CaptureFixture[str]) -> None:
    from course_lib.lessons.exercises import check_horovod_run

    result = _run(SOLUTION_SCRIPT)
    assert result.returncode == 0, "\n".join(result.log[-20:])
    assert check_horovod_run(result, workers=2) is True
    assert "correct" in capsys.readouterr().out


WRONG_ATTEMPTS = {
    "no_distributed_optimizer": (SOLUTION_SCRIPT, {
        "    optimizer = hvd.DistributedOptimizer(optimizer)": "    pass"}, "DIFFERENT weights"),
    "epochs_not_divided": (SOLUTION_SCRIPT, {
        "math.ceil(args.train_subset / (args.batch_size * hvd.size()))":
            "math.ceil(args.train_subset / args.batch_size)"}, "steps"),
    "plain_script_unchanged": (PLAIN_SCRIPT, {}, "ranks"),
}


@pytest.mark.horovod
@pytest.mark.parametrize("name", sorted(WRONG_ATTEMPTS))
def test_coding_self_check_rejects_wrong_attempts(name: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from course_lib.lessons.exercises import check_horovod_run

    source, edits, says = WRONG_ATTEMPTS[name]
    result = _run(_attempt(tmp_path, name, source, edits))
    assert check_horovod_run(result, workers=2) is False
    assert says in capsys.readouterr().out


def test_coding_self_check_without_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    from course_lib.lessons.exercises import check_horovod_run

    assert check_horovod_run(None) is False
    assert "not run yet" in capsys.readouterr().out


# --- the coding exercise of 02: one replica's step of a custom training loop -----------------------
REPLICA_STEP_CHECK = r'''
import importlib.util, json, sys
from course_lib.training import devices
names = devices.simulate_devices(2)
import tensorflow as tf
from course_lib.lessons.exercises import check_replica_step
spec = importlib.util.spec_from_file_location("answers", sys.argv[1])
answers = importlib.util.module_from_spec(spec); spec.loader.exec_module(answers)
strategy = tf.distribute.MirroredStrategy(names)
per_example = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

def per_replica_batch(model, optimizer, images, labels):   # divides by the per-replica batch
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(per_example(labels, model(images, training=True)))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss

def fixed_global_batch(model, optimizer, images, labels):  # 32 even at the partial step
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(per_example(labels, model(images, training=True)), global_batch_size=32)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss

def no_update(model, optimizer, images, labels):
    return tf.reduce_sum(per_example(labels, model(images, training=True)))

def unwritten(model, optimizer, images, labels):
    raise NotImplementedError

verdicts = {name: check_replica_step(fn, strategy) for name, fn in [
    ("solution", answers.replica_step), ("per_replica_batch", per_replica_batch),
    ("fixed_global_batch", fixed_global_batch), ("no_update", no_update), ("unwritten", unwritten)]}
print(json.dumps(verdicts))
'''


def test_replica_step_check_accepts_the_solution_and_rejects_wrong_steps(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", REPLICA_STEP_CHECK, str(SOLUTIONS_FILE)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdicts == {"solution": True, "per_replica_batch": False, "fixed_global_batch": False,
                        "no_update": False, "unwritten": False}, proc.stdout
    assert "not written yet" in proc.stdout and "Hint:" in proc.stdout
