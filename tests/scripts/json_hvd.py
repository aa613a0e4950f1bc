"""A Horovod-launchable script that speaks the JSON lines of docs/architecture.md without training.

For tests of what reads those lines (the control panel, tests/test_widgets.py; the launcher's streaming and
record collection, tests/test_launch.py): it takes the flags the panel passes (--batch-size, --epochs, --json,
plus ignored --train-subset / --marker) and prints, on rank 0, a ``config`` line, one ``epoch`` line per epoch
and a ``result`` line, and on every rank a ``digest`` line (:func:`rank_digest`: a different one per rank, so a
test can see each rank's line reach its rank), but imports no TensorFlow (about 5 CPU-s less per rank). Rank
and size come from horovodrun's HOROVOD_RANK / HOROVOD_SIZE; horovodrun does not need the script to call
hvd.init(). Extra test flag: --wait-for FILE (every rank waits, after rank 0 printed its config line, until FILE
exists: proves that output is streamed while the run goes on).

Real training under the launcher, to identical weights on every rank, is notebook 03's (``run_horovod``, its
output compared by strict nbval), tests/test_scripts.py's and tests/test_ssh_hosts.py's.
"""

import hashlib
import os
import sys
import time

from panel_flags import emit, panel_parser


def rank_digest(rank: int) -> str:
    """The ``digest`` that rank ``rank`` prints (a stand-in for a weights digest: this script has no weights)."""
    return hashlib.sha256(f"json_hvd rank {rank}".encode()).hexdigest()


def main():
    parser = panel_parser()
    parser.add_argument("--wait-for", default=None)
    args = parser.parse_args()
    rank, size = int(os.environ.get("HOROVOD_RANK", "0")), int(os.environ.get("HOROVOD_SIZE", "1"))
    global_batch = args.batch_size * size
    steps = max(1, args.train_subset // global_batch)
    if rank == 0:
        print(f"json_hvd: {size} workers, {steps} steps per epoch", flush=True)
        emit(args, "config", script="json_hvd.py", strategy="horovod", workers=size,
             per_worker_batch=args.batch_size, global_batch=global_batch, train_size=args.train_subset,
             steps_per_epoch=steps, samples_per_epoch=steps * global_batch, epochs=args.epochs, lr=0.01,
             optimizer="SGD", backward_passes_per_step=1)
    if args.wait_for:
        deadline = time.monotonic() + 120
        while not os.path.exists(args.wait_for):
            if time.monotonic() > deadline:
                sys.exit(f"json_hvd: {args.wait_for} never appeared: output is not streamed")
            time.sleep(0.05)
    emit(args, "digest", rank=rank, digest=rank_digest(rank))
    if rank != 0:
        return
    rates = []
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        time.sleep(0.05)  # an epoch that takes time, so the rate is finite
        seconds = time.perf_counter() - start
        rates.append(steps * global_batch / seconds)
        emit(args, "epoch", epoch=epoch, steps=steps, samples=steps * global_batch, epoch_time_s=seconds,
             images_per_sec=rates[-1], loss=2.3 / epoch, accuracy=0.1 * epoch)
    ips = sum(rates[1:]) / len(rates[1:]) if len(rates) > 1 else rates[0]
    emit(args, "result", workers=size, per_worker_batch=args.batch_size, global_batch=global_batch,
         images_per_sec=ips, images_per_sec_ci95=0.0, per_worker_images_per_sec=ips / size,
         epochs=args.epochs, total_steps=steps * args.epochs, test_loss=None, test_accuracy=None,
         wall_time_s=None, strategy="horovod")


if __name__ == "__main__":
    main()
