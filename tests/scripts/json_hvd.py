"""A Horovod-launchable script that speaks the JSON lines of docs/architecture.md without training.

For tests of what reads those lines (the control panel, tests/test_widgets.py): it takes the flags the
panel passes (--batch-size, --epochs, --json, plus ignored --train-subset / --marker) and prints, on
rank 0, a ``config`` line, one ``epoch`` line per epoch and a ``result`` line, like tiny_hvd.py, but
imports no TensorFlow (about 5 CPU-s less per rank). Rank and size come from horovodrun's
HOROVOD_RANK / HOROVOD_SIZE; horovodrun does not need the script to call hvd.init().
Real training under horovodrun is tiny_hvd.py's job (tests/test_launch.py).
"""

import os
import time

from panel_flags import emit, panel_parser


def main():
    args = panel_parser().parse_args()
    rank, size = int(os.environ.get("HOROVOD_RANK", "0")), int(os.environ.get("HOROVOD_SIZE", "1"))
    global_batch = args.batch_size * size
    steps = max(1, args.train_subset // global_batch)
    if rank != 0:
        return
    print(f"json_hvd: {size} workers, {steps} steps per epoch", flush=True)
    emit(args, "config", script="json_hvd.py", strategy="horovod", workers=size,
         per_worker_batch=args.batch_size, global_batch=global_batch, train_size=args.train_subset,
         steps_per_epoch=steps, samples_per_epoch=steps * global_batch, epochs=args.epochs, lr=0.01,
         optimizer="SGD", backward_passes_per_step=1)
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
