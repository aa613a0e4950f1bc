"""What notebook 06's fault drills read from its two multi-worker scripts, kept out of the scripts' way.

``source_code/mwms_fmnist.py`` and ``source_code/horovod_fmnist_elastic.py`` are written as the plain Keras
script (``keras_fmnist.py``) and the minimal Horovod script (``horovod_fmnist_minimal.py``) plus the lines a
learner must change; notebook 06 prints those differences. The drills need a little more, and each use of
this module in a script is one line marked ``# Course``:

- JSON lines for the launcher (docs/architecture.md): a ``worker`` event per process and group (its pid is
  what :class:`course_lib.runner.faults.WorkerKiller` kills), rank 0's ``epoch`` events (with the epoch's
  time, which times the kill, and the learning rate), an elastic group's ``reset`` and ``commit`` events;
- a MultiWorkerMirroredStrategy restart that is bit-identical to an uninterrupted run: the epochs a
  ``BackupAndRestore`` folder holds (the script skips the batches already trained on), and dropout masks
  drawn per ``(seed, epoch)`` (:class:`course_lib.training.callbacks.ReseedDropout`);
- the elastic drill's wait for a regrown group (:class:`RegrowWait`, ``--regrow-wait-s``).

Introduced in notebooks/06_beyond_one_machine.ipynb.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import time
from typing import Any

from course_lib.training.events import emit

__all__ = ["REGROW_POLL_S", "wait_seconds", "announce", "backed_up_epochs", "epoch_events", "mwms_callbacks", "report_reset",
           "commit_events", "RegrowWait"]

#: How often :class:`RegrowWait` asks the elastic driver whether a host came back (seconds).
REGROW_POLL_S = 0.25


def wait_seconds(text: str) -> float:
    """``argparse`` type of ``--regrow-wait-s``: a finite number of seconds >= 0 (nan and inf would fail mid-run)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {text} (a finite number, e.g. 60)")
    return value


def announce(rank: int, size: int) -> None:
    """Print this process's ``worker`` event (rank, group size, pid, host); every process, every new group."""
    host = os.environ.get("HOROVOD_HOSTNAME", socket.gethostname())
    emit("worker", rank=rank, size=size, pid=os.getpid(), host=host)


def backed_up_epochs(backup_dir: str | None) -> int:
    """Epochs already finished according to ``BackupAndRestore``'s last backup in ``backup_dir`` (0 without one).

    The chief writes the backup under ``backup_dir/chief``; the epoch is the one Keras saved with it.
    """
    import tensorflow as tf

    if not backup_dir:
        return 0
    latest = tf.train.latest_checkpoint(os.path.join(backup_dir, "chief"))
    if latest is None:
        return 0
    reader = tf.train.load_checkpoint(latest)
    return int(reader.get_tensor("ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE")) + 1


def epoch_events(rank: int, workers: int, steps: int, first_epoch: int = 0) -> Any:
    """A Keras callback: rank 0 prints one ``epoch`` event per finished epoch.

    Fields: ``epoch`` (1-based, counted from the run's start: ``first_epoch`` + Keras' epoch + 1),
    ``workers``, ``steps`` (per worker), ``epoch_time_s``, ``lr`` (the optimizer's rate), and Keras'
    logs (``loss``, ``accuracy``). Place it after Horovod's ``MetricAverageCallback`` (averaged logs) and
    before an elastic commit (a commit may end the epoch with an interrupt).
    """
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    class EpochEvents(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if rank != 0:
                return
            seconds = time.perf_counter() - self.started
            lr = float(keras.backend.get_value(self.model.optimizer.learning_rate))
            fields: dict[str, Any] = {"epoch": first_epoch + epoch + 1, "workers": workers, "steps": steps,
                                      "epoch_time_s": seconds, "lr": lr}
            fields.update({str(k): float(v) for k, v in (logs or {}).items()})
            emit("epoch", **fields)

    return EpochEvents()


def mwms_callbacks(seed: int, rank: int, workers: int, steps: int) -> list[Any]:
    """The MultiWorkerMirroredStrategy drill's callbacks: dropout masks per ``(seed, epoch)``, epoch events.

    Keras numbers a restarted run's epochs from the backup's, so the masks of epoch ``e`` are the same in a
    restarted and in an uninterrupted run.
    """
    from course_lib.training.callbacks import ReseedDropout  # late: callbacks imports TensorFlow

    return [ReseedDropout(seed), epoch_events(rank, workers, steps)]


def report_reset(rank: int, size: int, epoch: int, lr: float) -> None:
    """After an elastic reset: every rank's ``worker`` event, and rank 0's ``reset`` event."""
    if rank == 0:
        emit("reset", size=size, epoch=epoch, lr=lr)
        print(f"group re-formed: {size} worker(s), from the commit after epoch {epoch}, learning rate {lr:g}",
              flush=True)
    announce(rank, size)


def commit_events(state: Any, rank: int, workers: int) -> Any:
    """A Keras callback after Horovod's ``CommitStateCallback``: rank 0 prints a ``commit`` event."""
    from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

    class CommitEvents(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if rank == 0:
                emit("commit", epoch=state.epoch, workers=workers)

    return CommitEvents()


class RegrowWait:
    """``--regrow-wait-s``: at the first epoch end after the group shrank, wait for the driver to regrow it.

    A real job carries on at once and grows at a later commit; the drill's epochs are tiny, and on a fast
    machine all of them can end before a blacklisted host's cool-down and a new worker's start-up. Once per
    process, it polls the driver (``state.check_host_updates()``, a collective each rank calls the same
    number of times) until it raises ``HostsUpdatedInterrupt``, for at most ``wait_s`` seconds.
    """

    def __init__(self, wait_s: float) -> None:
        if not (math.isfinite(wait_s) and wait_s >= 0):
            raise ValueError(f"wait_s must be a finite number >= 0, got {wait_s!r}")
        self.wait_s, self.waited = wait_s, False
        self.sizes: list[int] = []

    def callback(self, state: Any, size: int) -> Any:
        """The callback for a group of ``size`` (build it in each call of the elastic training function)."""
        from course_lib.training.keras2 import keras  # late: keras2 imports TensorFlow

        self.sizes.append(size)
        outer = self

        class AwaitRegrowth(keras.callbacks.Callback):
            def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
                if outer.wait_s <= 0 or outer.waited or size >= max(outer.sizes):
                    return
                outer.waited = True
                for _ in range(math.ceil(outer.wait_s / REGROW_POLL_S)):
                    time.sleep(REGROW_POLL_S)
                    state.check_host_updates()  # raises HostsUpdatedInterrupt once a host was added

        return AwaitRegrowth()
