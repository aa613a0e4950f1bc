"""Plain PyTorch: the course CNN on Fashion-MNIST in one process, with no distribution at all.

Description: the starting point of notebook 07's DDP section. ``ddp_fmnist.py`` is this very script plus the
five DDP changes; see them with ``diff source_code/torch_fmnist.py source_code/ddp_fmnist.py``. Same model shape
and data order as the course (each epoch one permutation drawn from (seed, epoch)). Needs torch and NumPy, the
course's ``course_lib.training`` (NumPy only) and the Fashion-MNIST files (``sudo apt-get install
dataset-fashion-mnist`` or ``COURSE_DATA_DIR``); no TensorFlow.

How to run::

    python source_code/torch_fmnist.py --epochs 2 --train-subset 6000

With ``--checkpoint-dir DIR`` it saves a checkpoint after every epoch, and the same command run again continues
after the last saved epoch. ``--json`` prints the course's JSON lines (config, epoch, consumed, result, digest).
"""

import argparse
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from course_lib.training.consumption import summarize_ids  # Course: the ids each rank trained on
from course_lib.training.idx_arrays import load_idx_arrays
from course_lib.training.pipeline import epoch_indices, shard_padding
from course_lib.training.throughput import ThroughputMeter  # Course: the window every course script times
from course_lib.training.machine.placement import worker_share  # Course: this worker's granted cores


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=64, help="images per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--train-subset", type=int, default=60000, help="first N training images")
    parser.add_argument("--test-subset", type=int, default=10000, help="first N test images")
    parser.add_argument("--seed", type=int, default=42, help="seed of weights and data order")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="save a checkpoint here after every epoch; run again to resume from it")
    parser.add_argument("--json", action="store_true", help="print the course's JSON lines")
    args = parser.parse_args()
    for name in ("epochs", "batch_size", "train_subset", "test_subset"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    return args


def course_cnn():
    """The course CNN (course_lib.training.models.build_model's layers), in PyTorch."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
        nn.Flatten(), nn.Linear(12 * 12 * 64, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def digest(model):
    """sha256 of every weight's bytes, in order."""
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()


def state_bytes(optimizer):
    """Bytes of the optimizer state this process holds (Adam: two moments per parameter)."""
    return sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t))


def batches(x, y, rows, size):
    """The rows in steps of ``size``, as float tensors in [0, 1] (N, 1, 28, 28) and int64 labels."""
    for k in range(0, len(rows), size):
        take = rows[k:k + size]
        yield torch.from_numpy(x[take]).float().div_(255.0).unsqueeze(1), torch.from_numpy(y[take]).long()


def main():
    args = parse_args()
    rank, world = 0, 1  # Course: one process (the JSON lines name its rank)
    say = print
    emit = (lambda **e: print(json.dumps(e), flush=True)) if args.json else (lambda **e: None)
    torch.set_num_threads(worker_share(rank, world).threads)  # Course: threads = this worker's granted cores
    torch.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load_idx_arrays(args.train_subset, args.test_subset)
    n = len(x_train)

    model = course_cnn()
    lr = args.lr
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    first = 0
    path = Path(args.checkpoint_dir) / "checkpoint.pt" if args.checkpoint_dir else None
    if path and path.exists():
        saved = torch.load(path, map_location="cpu")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        first = saved["epoch"]
        say(f"resumed after epoch {first}")
        emit(event="resume", epoch=first, digest=digest(model))
    per_worker = len(epoch_indices(n, seed=args.seed, epoch=0, num_workers=world))  # images per worker per epoch
    steps = math.ceil(per_worker / args.batch_size)
    say(f"{world} worker(s), {n} images, per-worker batch {args.batch_size}, global batch {args.batch_size * world}, "
        f"{steps} steps per epoch, lr {lr:g}, epochs {first + 1}..{args.epochs}")
    emit(event="config", script="torch_fmnist.py", strategy="torch", workers=world, train_size=n,
         per_worker_batch=args.batch_size, global_batch=args.batch_size * world, steps_per_epoch=steps,
         epochs=args.epochs, first_epoch=first + 1, lr=lr)

    # Course: every epoch timed from the end of its step 1 (the first epoch is the warm-up), as the TF scripts time
    # theirs: the images/s and the JSON epoch line come from the course's one meter (course_lib.training.throughput).
    meter = ThroughputMeter(args.batch_size * world, samples_per_epoch=per_worker * world,
                            warmup_steps=1, workers=world, rank=rank, json_lines=args.json)
    for epoch in range(first, args.epochs):
        model.train()
        rows = epoch_indices(n, seed=args.seed, epoch=epoch, num_workers=world, worker_index=rank)
        total = 0.0
        meter.on_epoch_begin(epoch)  # Course
        for step, (x, y) in enumerate(batches(x_train, y_train, rows, args.batch_size)):
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            total += float(loss.detach())
            meter.on_train_batch_end(step)  # Course: the step is done (float() waited for it)
        real = rows[~shard_padding(n, world, rank)]
        emit(event="consumed", rank=rank, epoch=epoch + 1, padding=len(rows) - len(real), **summarize_ids(real))
        say(f"epoch {epoch + 1}: loss {total / steps:.4f}")
        meter.on_epoch_end(epoch, {"loss": total / steps})  # Course: its line and JSON epoch event
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch + 1}, path.with_suffix(".tmp"))
            os.replace(path.with_suffix(".tmp"), path)
            emit(event="checkpoint", epoch=epoch + 1, digest=digest(model))

    model.eval()
    with torch.no_grad():
        right, loss_sum = 0, 0.0
        for x, y in batches(x_test, y_test, np.arange(len(x_test)), 256):
            logits = model(x)
            right += int((logits.argmax(1) == y).sum())
            loss_sum += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
    say(f"test accuracy {right / len(x_test):.4f}")
    emit(event="result", workers=world, test_accuracy=right / len(x_test), test_loss=loss_sum / len(x_test),
         optimizer_state_bytes=state_bytes(optimizer))
    emit(event="digest", rank=rank, digest=digest(model))


if __name__ == "__main__":
    main()
