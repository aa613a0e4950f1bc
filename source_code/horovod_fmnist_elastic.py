"""Horovod Elastic training of the course CNN on Fashion-MNIST: workers may come and go.

Description: the Keras script of source_code/horovod_fmnist.py made elastic — the training state
(weights, optimizer, epoch) is committed at every epoch end, and when a worker dies or a host is
added, the survivors roll back to the last commit, re-form the group at its new size, rescale the
learning rate and carry on until the last epoch.

How to run (from the repository root; 2 workers that may shrink to 1 and grow back to 2)::

    horovodrun -np 2 --min-np 1 --max-np 2 --host-discovery-script cluster/discover_hosts.sh \
        --network-interface lo --blacklist-cooldown-range 1 2 \
        python source_code/horovod_fmnist_elastic.py --epochs 6 --train-subset 1024

Elastic mode always uses Gloo. On one machine the discovery script names it twice (``localhost``
and ``127.0.0.1``), because Horovod blacklists the whole host of a failed worker. The lines that
make the script elastic are marked ``# Horovod:``. With ``--json``, rank 0 prints the JSON lines
of docs/architecture.md, and every rank prints a ``worker`` event (rank, size, pid, host) each
time the group is formed. ``--regrow-wait-s S`` is for drills (notebook 06, tests/test_ssh_hosts.py):
the first epoch end after a shrink waits up to S s for the driver to take a worker back in, so that the
regrowth shows on any machine; a real job carries on at once and grows at a later commit.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time

from course_lib.training.events import emit
from course_lib.training.flags import HelpFormatter, add_data_flags, add_run_flags, add_training_flags, add_worker_flags

#: How often --regrow-wait-s asks the driver whether a host came back (seconds).
REGROW_POLL_S = 0.25


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the flags; every bad flag exits here, before TensorFlow starts."""
    parser = argparse.ArgumentParser(
        description="Elastic Horovod training of the course CNN on Fashion-MNIST: survives a lost "
        "worker and takes new ones in. One epoch = one pass over the training set by all workers.",
        epilog="example: horovodrun -np 2 --min-np 1 --max-np 2 --host-discovery-script "
        "cluster/discover_hosts.sh --network-interface lo python "
        "source_code/horovod_fmnist_elastic.py --epochs 6 --train-subset 1024",
        formatter_class=HelpFormatter)
    add_training_flags(parser, batch_size=64, epochs=6, scale_lr_help=None,
                       lr_help="learning rate of ONE worker; the run uses lr x sqrt(current workers) (Adam)")
    add_data_flags(parser)
    add_worker_flags(parser)
    add_run_flags(parser, precision=False, throughput=False)
    parser.add_argument("--regrow-wait-s", type=float, default=0.0, metavar="S",
                        help="drills only: at the first epoch end after the group shrank, wait up to S seconds for "
                        "the driver to take a worker back in (a real job carries on at once and grows at a later "
                        "commit; tiny epochs on a fast machine can all end before the cool-down does)")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.regrow_wait_s) and args.regrow_wait_s >= 0):  # nan and inf would fail mid-run
        parser.error(f"--regrow-wait-s must be >= 0 seconds, got {args.regrow_wait_s:g} (a finite number, e.g. 60)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Train elastically, evaluate, print the results; returns the exit status."""
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    from course_lib.training.keras2 import keras  # Keras 2 (tf_keras), before Horovod's Keras layer loads
    import horovod.tensorflow.keras as hvd

    from course_lib.training import autograph, data, devices, epochs, models, optimizers, pipeline, report, seeding

    autograph.leave_horovod_unconverted()  # start-up: 2-3 s less per rank, the same graph (training/autograph.py)

    hvd.init()  # Horovod: join the current group (elastic: rendezvous with the driver)
    # Horovod: one core (or one GPU) per worker, set before TensorFlow initialises its devices.
    devices.configure_worker(hvd.local_rank(), threads_per_worker=args.threads_per_worker,
                             local_size=hvd.local_size())

    seeding.configure(args.seed)
    fmnist = data.load_arrays(train_subset=args.train_subset, test_subset=args.test_subset,
                              data_dir=args.data_dir)
    n_train = len(fmnist.y_train)
    host = os.environ.get("HOROVOD_HOSTNAME", socket.gethostname())

    def announce(why: str) -> None:
        """Every rank says who it is in the (new) group; rank 0 says why the group formed."""
        emit("worker", args.json, rank=hvd.rank(), size=hvd.size(), pid=os.getpid(), host=host)
        if hvd.rank() == 0:
            print(f"group formed ({why}): {hvd.size()} worker(s)", flush=True)

    model = models.build_model(seed=args.seed)
    def scaled_lr() -> float:
        """Horovod: Adam's rate follows the CURRENT number of workers, by its square root (notebook 04)."""
        return args.lr * math.sqrt(hvd.size())

    optimizer = hvd.DistributedOptimizer(optimizers.get_optimizer("adam", scaled_lr()))
    models.compile_model(model, optimizer)

    def warmup_step() -> None:
        """One training step: it builds the optimizer's slots on every worker. A new worker runs
        it before the state exists and the others run it in their reset, so that all of them make
        the same collective calls (otherwise the newcomer hangs, horovod#2652)."""
        one = pipeline.make_dataset(fmnist.x_train, fmnist.y_train, batch_size=args.batch_size,
                                    training=True, seed=args.seed, num_workers=hvd.size(),
                                    worker_index=hvd.rank()).take(1)
        model.fit(one, steps_per_epoch=1, epochs=1, verbose=0)

    warmup_step()  # Horovod: before the state is created (see warmup_step)
    # Horovod: what survives a reset: weights, optimizer slots, and the epoch counter.
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    def on_state_reset() -> None:
        """After a worker left or joined: same collectives as a newcomer, undo the warm-up step's
        update (back to the last commit), and rescale the learning rate to the new size."""
        warmup_step()
        state.restore()  # Horovod: back to the committed weights (the warm-up step changed them)
        model.optimizer.learning_rate = scaled_lr()  # Horovod: the rate for the new size
        if hvd.rank() == 0:
            emit("reset", args.json, size=hvd.size(), epoch=state.epoch, lr=scaled_lr())
        announce("reset")

    state.register_reset_callbacks([on_state_reset])  # Horovod: run after every re-formed group

    class EpochReport(keras.callbacks.Callback):
        """Rank 0 prints one line and one ``epoch`` event per finished epoch (global numbering)."""

        def __init__(self, first_epoch: int, steps: int) -> None:
            super().__init__()
            self.first_epoch, self.steps, self.t0 = first_epoch, steps, 0.0

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            seeding.reseed_dropout(model, args.seed, self.first_epoch + epoch)
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if hvd.rank() != 0:
                return
            seconds = time.perf_counter() - self.t0
            samples = epochs.EpochPlan(n_train, args.batch_size, hvd.size()).samples_per_epoch
            logs = {k: float(v) for k, v in (logs or {}).items()}
            number = self.first_epoch + epoch + 1
            print(f"epoch {number}/{args.epochs}: {hvd.size()} worker(s), loss "
                  f"{logs.get('loss', float('nan')):.4f}, {seconds:.2f} s", flush=True)
            emit("epoch", args.json, epoch=number, workers=hvd.size(), steps=self.steps,
                 samples=samples, epoch_time_s=seconds, images_per_sec=samples / seconds,
                 **logs)

    class CommitReport(keras.callbacks.Callback):
        """Rank 0 reports each commit (placed after CommitStateCallback)."""

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if hvd.rank() == 0:
                emit("commit", args.json, epoch=state.epoch, workers=hvd.size())

    sizes: list[int] = []

    class AwaitRegrowth(keras.callbacks.Callback):
        """--regrow-wait-s: once, at the first epoch end after the group shrank, poll the driver for a
        re-admitted host; the poll raises HostsUpdatedInterrupt when one came back."""

        waited = False  # once per process (class-level: each reset builds new callbacks)

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if args.regrow_wait_s <= 0 or AwaitRegrowth.waited or hvd.size() >= max(sizes):
                return
            AwaitRegrowth.waited = True
            # Every rank polls the same number of times: each poll is a collective (a broadcast from rank 0).
            for _ in range(math.ceil(args.regrow_wait_s / REGROW_POLL_S)):
                time.sleep(REGROW_POLL_S)
                state.check_host_updates()  # Horovod: raises HostsUpdatedInterrupt once a host was added

    @hvd.elastic.run  # Horovod: restart this function after every reset, from the last commit
    def train(state: "hvd.elastic.KerasState") -> None:
        workers, rank = hvd.size(), hvd.rank()
        sizes.append(workers)
        first = state.epoch
        steps = epochs.EpochPlan(n_train, args.batch_size, workers).steps_per_epoch
        if rank == 0:
            print(f"training epochs {first + 1}..{args.epochs} on {workers} worker(s), lr "
                  f"{scaled_lr():g}", flush=True)
        # Horovod: re-shard for the current size; the order depends only on (seed, epoch).
        train_data = pipeline.make_epochs_dataset(
            fmnist.x_train, fmnist.y_train, batch_size=args.batch_size, seed=args.seed,
            num_workers=workers, worker_index=rank, first_epoch=first, last_epoch=args.epochs)
        callbacks = [
            hvd.callbacks.MetricAverageCallback(),  # Horovod: average the metrics over workers
            EpochReport(first, steps),
            hvd.elastic.UpdateEpochStateCallback(state),  # Horovod: state.epoch = epochs done
            # Horovod: commit (and look for added/removed hosts) at each epoch end only: the
            # batch count is larger than any epoch, and the data order restarts per epoch.
            hvd.elastic.CommitStateCallback(state, batches_per_commit=10**9),
            CommitReport(),
            AwaitRegrowth(),  # Horovod: drills only (--regrow-wait-s), after the commit
        ]
        model.fit(train_data, steps_per_epoch=steps, epochs=args.epochs - first,
                  callbacks=callbacks, verbose=0)

    if hvd.rank() == 0:  # the epoch at the starting size (a reset re-plans it for the new size)
        report.report_config(plan=epochs.EpochPlan(n_train, args.batch_size, hvd.size()),
                             script="horovod_fmnist_elastic.py", strategy="horovod-elastic", epochs=args.epochs,
                             first_epoch=1, lr=scaled_lr(), json_lines=args.json, base_lr=args.lr,
                             scale_lr=True, optimizer="adam", seed=args.seed)
    announce("start")
    train(state)

    digest = models.weights_digest(model)
    if hvd.rank() == 0:  # Horovod: evaluate and report on rank 0 only
        test = pipeline.make_dataset(fmnist.x_test, fmnist.y_test, batch_size=256, training=False)
        report.report_result(
            scores=model.evaluate(test, verbose=0), plan=epochs.EpochPlan(n_train, args.batch_size, hvd.size()),
            strategy="horovod-elastic", epochs=args.epochs, epochs_run=state.epoch, started=started,
            json_lines=args.json, headline=f"finished epoch {state.epoch}/{args.epochs} on {hvd.size()} worker(s); "
            "test accuracy {acc:.4f}; wall time {wall:.1f} s",
            # the group's size changed during the run: its steps per epoch did too
            total_steps=None, epochs_done=state.epoch, sizes=sizes)
    emit("digest", args.json, rank=hvd.rank(), digest=digest)
    # Horovod: a survivor can leave train() early without an exception on some TF errors
    # (horovod/tensorflow/elastic.py swallows an UnknownError that names no Horovod op), so
    # say so with a failing status instead of a silent 0.
    if state.epoch < args.epochs:
        print(f"error: training stopped after epoch {state.epoch} of {args.epochs}",
              file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
