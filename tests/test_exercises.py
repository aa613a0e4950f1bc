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
