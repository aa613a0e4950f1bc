"""Horovod Elastic for real: kill one of two workers mid-epoch; the job must shrink to one
worker, resume from the last commit, grow back to two when the host's cool-down ends, and reach
its final epoch, leaving no process behind.

The test asserts the final epoch reached, not only the exit status: a survivor can end with
status 0 early on some TensorFlow errors (see docs on Horovod Elastic in /work/shared/FACTS.md).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from course_lib.runner import multiworker as mw
from course_lib.runner.faults import WorkerKiller, world_sizes

from test_multiworker import leftovers

SCRIPT = Path(__file__).resolve().parents[1] / "source_code" / "horovod_fmnist_elastic.py"
EPOCHS = 4  # as notebook 06: the kill lands in epoch 2, the group grows back at the end of epoch 2 or 3
# The job must also learn. Measured on the 2-core machine (2026-11-21), 2 workers, 6 epochs of
# 1024 images, NOT interrupted, seeds 1, 42, 7: test accuracy 0.785, 0.793, 0.758, epoch loss
# 1.53-1.58 -> 0.44-0.49. 4 epochs with the kill of notebook 06 (2026-11-26, twice): loss 1.61 -> 0.64, test
# accuracy 0.789 on 512 test images. The kill only changes how
# many workers share each epoch. Threshold with margin (chance: 0.10):
MIN_ACCURACY = 0.4


@pytest.mark.horovod
def test_elastic_run_survives_a_killed_worker_and_scales_back_up():
    mark = uuid.uuid4().hex
    killer = WorkerKiller(rank=1, after_epoch=1, fraction=0.5)
    result = mw.run_elastic(
        SCRIPT, ["--epochs", str(EPOCHS), "--train-subset", "1024", "--test-subset", "256",
                 "--json"],
        num_workers=2, min_workers=1, max_workers=2, cooldown_range=(1, 2), timeout=170,
        env={"COURSE_TEST_MARK": mark}, on_event=killer, show="none")
    assert killer.killed_pid is not None
    sizes = world_sizes(result)
    assert sizes[:2] == [2, 1], sizes  # the world shrank after the kill ...
    assert 2 in sizes[2:], sizes  # ... and grew again after the cool-down
    resets = [e for r, e in result.events if r == 0 and e["event"] == "reset"]
    assert resets[0]["size"] == 1 and resets[0]["epoch"] >= 1  # resumed from a commit
    assert [e["epoch"] for e in result.epochs][-1] == EPOCHS  # the final epoch was reached
    assert result.result["epochs_done"] == EPOCHS
    assert result.epochs[-1]["loss"] < result.epochs[0]["loss"]  # the loss fell ...
    assert result.result["test_accuracy"] >= MIN_ACCURACY, result.result  # ... and it learned
    assert len(set(result.digests.values())) == 1
    assert leftovers(mark, result.pids) == []
