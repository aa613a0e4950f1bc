"""course_lib.lessons.beyond_one_machine.elastic_run: notebook 06's table and figure of an elastic run."""

from __future__ import annotations

import pytest

from course_lib.lessons.beyond_one_machine import elastic_run
from course_lib.runner.runlog import RunResult


def _epoch(epoch: int, workers: int, seconds: float, loss: float) -> dict:
    return {"event": "epoch", "epoch": epoch, "workers": workers, "steps": 16 // workers, "lr": 1e-3 * workers ** 0.5,
            "epoch_time_s": seconds, "loss": loss, "accuracy": 0.5}


def _result(epochs: list[dict]) -> RunResult:
    result = RunResult(command=["x"], returncode=0)
    result.epochs.extend(epochs)
    return result


def test_the_table_keeps_the_epochs_in_order_with_their_group_size() -> None:
    run = _result([_epoch(1, 2, 0.8, 1.2), _epoch(2, 2, 0.8, 0.9), _epoch(3, 1, 1.6, 0.7), _epoch(4, 2, 0.8, 0.6)])
    table = elastic_run.epoch_table(run)
    assert list(table.columns) == list(elastic_run.COLUMNS)
    assert list(table["workers"]) == [2, 2, 1, 2] and list(table["steps"]) == [8, 8, 16, 8]
    figure = elastic_run.plot_epochs(table)
    left, right = figure.get_axes()
    assert len(left.patches) == 4 and "group size" in left.get_title()
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["2 workers", "1 worker"]
    labels = [text.get_text() for text in left.texts]   # the 2-worker epochs first, then the 1-worker one
    assert labels == ["8 steps", "8 steps", "8 steps", "16 steps"]


def test_a_run_without_epochs_or_with_foreign_events_is_refused() -> None:
    with pytest.raises(ValueError, match="no epoch event"):
        elastic_run.epoch_table(_result([]))
    with pytest.raises(ValueError, match="epoch_time_s"):
        elastic_run.epoch_table(_result([{"event": "epoch", "epoch": 1, "workers": 2, "steps": 8, "lr": 0.1,
                                          "loss": 1.0}]))
