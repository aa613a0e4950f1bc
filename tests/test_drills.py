"""course_lib/training/drills.py: what notebook 06's drills read from its two multi-worker scripts.

The real runs (the elastic job that loses a worker and grows back, the MWMS run killed and restarted to the same
weights) are notebook 06's; nbval compares their verdicts. Here: the flag's check, the events' shape, and the
restart's epoch count from a real BackupAndRestore folder.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from course_lib.training import drills


@pytest.mark.parametrize("text, value", [("0", 0.0), ("60", 60.0), ("0.5", 0.5)])
def test_wait_seconds_accepts_finite_non_negative(text: str, value: float) -> None:
    assert drills.wait_seconds(text) == value


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "-inf", "soon"])
def test_wait_seconds_refuses_what_would_fail_mid_run(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"must be >= 0 seconds, got {text} "):
        drills.wait_seconds(text)
    with pytest.raises(ValueError, match="finite number >= 0"):
        drills.RegrowWait(float("nan") if text in ("nan", "soon") else float(text))


def test_announce_and_reset_events(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOROVOD_HOSTNAME", "127.0.0.1")
    drills.announce(1, 2)
    drills.report_reset(0, 1, 2, 0.001)
    drills.report_reset(1, 1, 2, 0.001)   # rank 1: its worker event only
    lines = capsys.readouterr().out.splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert events == [{"event": "worker", "rank": 1, "size": 2, "pid": os.getpid(), "host": "127.0.0.1"},
                      {"event": "reset", "size": 1, "epoch": 2, "lr": 0.001},
                      {"event": "worker", "rank": 0, "size": 1, "pid": os.getpid(), "host": "127.0.0.1"},
                      {"event": "worker", "rank": 1, "size": 1, "pid": os.getpid(), "host": "127.0.0.1"}]
    assert "group re-formed: 1 worker(s), from the commit after epoch 2, learning rate 0.001" in lines


def test_regrow_wait_waits_once_and_only_after_a_shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drills.time, "sleep", lambda s: None)

    class State:
        polls = 0

        def check_host_updates(self) -> None:
            self.polls += 1

    state, wait = State(), drills.RegrowWait(1.0)
    wait.callback(state, 2).on_epoch_end(0)      # the starting size: no wait
    assert state.polls == 0
    shrunk = wait.callback(state, 1)
    shrunk.on_epoch_end(0)                        # smaller than before: polls the driver for up to 1 s
    assert state.polls == 4                       # every 0.25 s (REGROW_POLL_S): the same count on every rank
    shrunk.on_epoch_end(1)                        # once per process
    wait.callback(state, 1).on_epoch_end(0)
    assert state.polls == 4
    off = drills.RegrowWait(0.0)
    off.callback(state, 2)
    off.callback(state, 1).on_epoch_end(0)        # --regrow-wait-s 0: a real job carries on at once
    assert state.polls == 4


class Regrown(Exception):
    """Stands for Horovod's HostsUpdatedInterrupt."""


def test_regrow_wait_ends_at_the_drivers_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drills.time, "sleep", lambda s: None)

    class State:
        polls = 0

        def check_host_updates(self) -> None:
            self.polls += 1
            if self.polls == 2:
                raise Regrown

    state, wait = State(), drills.RegrowWait(60.0)
    wait.callback(state, 2)
    with pytest.raises(Regrown):
        wait.callback(state, 1).on_epoch_end(0)
    assert state.polls == 2


def test_backed_up_epochs_reads_the_keras_backup(tmp_path: Path) -> None:
    """A real BackupAndRestore folder after 2 epochs of a tiny model says 2; none and an empty folder say 0."""
    from course_lib.training.keras2 import keras
    import numpy as np

    assert drills.backed_up_epochs(None) == 0 and drills.backed_up_epochs(str(tmp_path / "none")) == 0
    # A seed first: a test file that ran before in this process may have enabled TensorFlow's op determinism
    # (tests/test_accumulation.py, training.seeding), which refuses random ops without one (the Dense layer's init).
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    backup = str(tmp_path / "backup")

    class StopAfter(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if epoch == 1:
                self.model.stop_training = True

    x = np.zeros((4, 2), "float32")
    model.fit(x, x[:, :1], epochs=5, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(backup, delete_checkpoint=False), StopAfter()])
    assert drills.backed_up_epochs(backup) == 2
