"""PyTorch DDP: the course CNN on Fashion-MNIST, one process per worker, started by torchrun.

Description: ``torch_fmnist.py`` (one process, no distribution) plus the five DDP changes, numbered
``DDP (k/5)``; every line that is there because of DDP says ``# DDP``. Same model shape, same data order as
the course (each epoch one permutation drawn from (seed, epoch); rank r takes positions r, r + W, ...:
PyTorch's ``DistributedSampler`` policy), same per-worker batch, Adam; ``--scale-lr`` scales its rate by the
square root of the workers, the course's rule for Adam (``course_lib.training.schedules.scaled_lr``, the function
every course script's ``--scale-lr`` calls). Gloo on the CPU; NCCL when CUDA is available, with the model and
every batch on the rank's GPU (``LOCAL_RANK``), as PyTorch's own DDP examples do: untested on a GPU (the course's
machines have none; tests/test_frameworks_scripts.py fakes the device choice). Needs torch and NumPy, the course's
``course_lib.training`` (NumPy only) and the Fashion-MNIST files (``sudo apt-get install
dataset-fashion-mnist`` or ``COURSE_DATA_DIR``); no TensorFlow. Notebook 07 runs it from ``.venv-07``.

How to run::

    torchrun --standalone --nproc-per-node 2 source_code/ddp_fmnist.py --epochs 2 --train-subset 6000

With ``--checkpoint-dir DIR`` rank 0 saves a checkpoint after every epoch; the same command run again continues
after the last saved epoch, on any number of workers. ``--json`` prints the course's JSON lines (config, epoch,
consumed, checkpoint, result, digest). ``--bucket-cap-mb``, ``--no-sync-steps`` and ``--zero`` are the knobs of
notebook 07's concept map (DDP's gradient buckets, accumulation without all-reduce, ZeRO optimizer sharding).
"""

import argparse
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist  # DDP
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # DDP: the gradient hook's all-reduce
from torch.distributed.optim import ZeroRedundancyOptimizer  # DDP: --zero shards Adam's state over the ranks
from torch.nn.parallel import DistributedDataParallel as DDP  # DDP

from course_lib.training.consumption import summarize_ids  # Course: the ids each rank trained on
from course_lib.training.idx_arrays import load_idx_arrays
from course_lib.training.pipeline import epoch_indices, shard_padding
from course_lib.training.throughput import ThroughputMeter  # Course: the window every course script times
from course_lib.training.schedules import scaled_lr  # Course: the learning-rate rule of every course script
from course_lib.training.machine.placement import worker_share  # Course: this worker's granted cores


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=64, help="images per step PER WORKER")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate per worker (before --scale-lr)")
    parser.add_argument("--scale-lr", action="store_true",
                        help="scale the learning rate with the number of workers N by the course's rule for Adam: "
                        "x sqrt(N) (course_lib.training.schedules.scaled_lr; notebooks 03 and 04)")
    parser.add_argument("--train-subset", type=int, default=60000, help="first N training images")
    parser.add_argument("--test-subset", type=int, default=10000, help="first N test images")
    parser.add_argument("--seed", type=int, default=42, help="seed of weights and data order")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="save a checkpoint here after every epoch; run again to resume from it")
    parser.add_argument("--json", action="store_true", help="print the course's JSON lines")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="gradient bucket size (MB)")  # Course
    parser.add_argument("--no-sync-steps", type=int, default=1, help="backward passes per all-reduce")  # Course
    parser.add_argument("--zero", action="store_true", help="ZeroRedundancyOptimizer: Adam state sharded")  # Course
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size", "train_subset", "test_subset"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.no_sync_steps < 1:  # Course
        parser.error(f"--no-sync-steps must be at least 1, got {args.no_sync_steps}")  # Course
    return args


def course_cnn():
    """The course CNN (course_lib.training.models.build_model's layers), in PyTorch."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
        nn.Flatten(), nn.Linear(12 * 12 * 64, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def pick_device(local_rank):
    """The process group's backend and this rank's device: ``("nccl", cuda:local_rank)`` when CUDA is available,
    else ``("gloo", cpu)``. Untested on a GPU."""
    if torch.cuda.is_available():  # DDP: NCCL all-reduces CUDA tensors only, so everything goes to this rank's GPU
        return "nccl", torch.device("cuda", local_rank)
    return "gloo", torch.device("cpu")


def learning_rate(args, world):
    """Adam's rate: ``--lr``, or with ``--scale-lr`` the course's rule for Adam at ``world`` workers (x sqrt)."""
    return scaled_lr("adam", args.lr, world) if args.scale_lr else args.lr


def digest(model):
    """sha256 of every weight's bytes, in order (copied to the CPU first when they live on a GPU)."""
    return hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())).hexdigest()


def state_bytes(optimizer):
    """Bytes of the optimizer state this process holds (Adam: two moments per parameter it owns)."""
    inner = optimizer.optim if isinstance(optimizer, ZeroRedundancyOptimizer) else optimizer  # DDP: --zero
    return sum(t.numel() * t.element_size() for s in inner.state.values() for t in s.values() if torch.is_tensor(t))


def batches(x, y, rows, size, device):
    """The rows in steps of ``size``, as float tensors in [0, 1] (N, 1, 28, 28) and int64 labels, on ``device``."""
    for k in range(0, len(rows), size):
        take = rows[k:k + size]
        images = torch.from_numpy(x[take]).float().div_(255.0).unsqueeze(1)
        yield images.to(device), torch.from_numpy(y[take]).long().to(device)  # DDP: the batch on the model's device


def main():
    args = parse_args()
    # DDP (1/5): join the workers. With CUDA: NCCL, and this rank's GPU, LOCAL_RANK (set by torchrun), holds the
    # model and every batch, as PyTorch's DDP examples do (NCCL all-reduces CUDA tensors only); without: Gloo on
    # the CPU. The GPU path is untested on a GPU (tests/test_frameworks_scripts.py fakes the device choice).
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))  # DDP: this worker's index on its machine
    backend, device = pick_device(local_rank)  # DDP
    if device.type == "cuda":  # DDP
        torch.cuda.set_device(device)  # DDP: NCCL's communicator for this rank uses this GPU
    dist.init_process_group(backend)  # DDP (1/5)
    rank, world = dist.get_rank(), dist.get_world_size()  # DDP: this worker's index and the number of workers
    say = print if rank == 0 else (lambda *a, **k: None)  # DDP: rank 0 alone logs
    emit = (lambda **e: print(json.dumps(e), flush=True)) if args.json else (lambda **e: None)
    torch.set_num_threads(worker_share(rank, world).threads)  # Course: threads = this worker's granted cores
    torch.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load_idx_arrays(args.train_subset, args.test_subset)
    n = len(x_train)

    # DDP (2/5): wrap the model, on its device; rank 0's weights reach all. On a GPU, device_ids=[local_rank]: one
    # GPU per process (on the CPU, None).
    on_gpu = [local_rank] if device.type == "cuda" else None  # DDP
    model = DDP(course_cnn().to(device), device_ids=on_gpu, bucket_cap_mb=args.bucket_cap_mb)  # DDP (2/5)
    calls = {"allreduce": 0, "bytes": 0}  # Course: what the gradient hook sends, counted

    def counted_allreduce(state, bucket):  # DDP: the hook every gradient bucket goes through (Course: counted)
        calls["allreduce"] += 1
        calls["bytes"] += bucket.buffer().numel() * bucket.buffer().element_size()
        return default_hooks.allreduce_hook(None, bucket)

    model.register_comm_hook(None, counted_allreduce)
    # DDP (3/5): scale the rate (optional, --scale-lr) by the course's rule, the one function every course script
    # calls; for Adam, the only optimizer here, by the square root of the workers (notebooks 03 and 04).
    lr = learning_rate(args, world)  # DDP (3/5)
    if args.zero:  # DDP: each rank keeps Adam's state for its part of the parameters only
        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=lr)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    first = 0
    path = Path(args.checkpoint_dir) / "checkpoint.pt" if args.checkpoint_dir else None
    if path and path.exists():  # every rank reads rank 0's file (one machine, or a shared disk)
        saved = torch.load(path, map_location="cpu")
        model.module.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        first = saved["epoch"]
        say(f"resumed after epoch {first}")
        emit(event="resume", epoch=first, digest=digest(model))
    per_worker = len(epoch_indices(n, seed=args.seed, epoch=0, num_workers=world))  # images per worker per epoch
    steps = math.ceil(per_worker / args.batch_size)
    say(f"{world} worker(s), {n} images, per-worker batch {args.batch_size}, global batch {args.batch_size * world}, "
        f"{steps} steps per epoch, lr {lr:g}, epochs {first + 1}..{args.epochs}")
    emit(event="config", script="ddp_fmnist.py", strategy="ddp", workers=world, train_size=n,
         per_worker_batch=args.batch_size, global_batch=args.batch_size * world, steps_per_epoch=steps,
         epochs=args.epochs, first_epoch=first + 1, lr=lr,
         bucket_cap_mb=args.bucket_cap_mb, no_sync_steps=args.no_sync_steps, zero=args.zero)  # Course

    # Course: every epoch timed from the end of its step 1 (the first epoch is the warm-up), as the TF scripts time
    # theirs: the images/s and the JSON epoch line come from the course's one meter (course_lib.training.throughput).
    meter = ThroughputMeter(args.batch_size * world, samples_per_epoch=per_worker * world,
                            warmup_steps=1, workers=world, rank=rank, json_lines=args.json)
    for epoch in range(first, args.epochs):
        model.train()
        # DDP (4/5): this rank's shard of the epoch's permutation: positions rank, rank + W, ...
        rows = epoch_indices(n, seed=args.seed, epoch=epoch, num_workers=world, worker_index=rank)
        calls.update(allreduce=0, bytes=0)  # Course
        total = 0.0
        meter.on_epoch_begin(epoch)  # Course
        for step, (x, y) in enumerate(batches(x_train, y_train, rows, args.batch_size, device)):
            last = (step + 1) % args.no_sync_steps == 0 or step + 1 == steps
            with model.no_sync() if not last else torch.enable_grad():  # DDP: no all-reduce until the last pass
                loss = loss_fn(model(x), y) / args.no_sync_steps
                loss.backward()  # DDP (5/5): the backward pass all-reduces (averages) the gradients, bucket by bucket
            if last:
                optimizer.step()
                optimizer.zero_grad()
            total += float(loss.detach()) * args.no_sync_steps
            meter.on_train_batch_end(step)  # Course: the step is done (float() waited for it)
        real = rows[~shard_padding(n, world, rank)]
        emit(event="consumed", rank=rank, epoch=epoch + 1, padding=len(rows) - len(real), **summarize_ids(real))
        say(f"epoch {epoch + 1}: loss {total / steps:.4f}")
        meter.on_epoch_end(epoch, {"loss": total / steps, "allreduce_calls": calls["allreduce"],  # Course
                                   "allreduce_bytes": calls["bytes"]})  # Course: its line and JSON epoch event
        if path:
            if args.zero:
                optimizer.consolidate_state_dict(to=0)  # DDP: rank 0 gathers the sharded state to save it
            if rank == 0:  # DDP: rank 0 alone saves
                path.parent.mkdir(parents=True, exist_ok=True)
                torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch + 1}, path.with_suffix(".tmp"))
                os.replace(path.with_suffix(".tmp"), path)
                emit(event="checkpoint", epoch=epoch + 1, digest=digest(model))

    if rank == 0:  # DDP: rank 0 alone evaluates and reports
        model.eval()
        with torch.no_grad():
            right, loss_sum = 0, 0.0
            for x, y in batches(x_test, y_test, np.arange(len(x_test)), 256, device):
                logits = model.module(x)
                right += int((logits.argmax(1) == y).sum())
                loss_sum += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
        say(f"test accuracy {right / len(x_test):.4f}")
        emit(event="result", workers=world, test_accuracy=right / len(x_test), test_loss=loss_sum / len(x_test),
             optimizer_state_bytes=state_bytes(optimizer))
    emit(event="state", rank=rank, optimizer_state_bytes=state_bytes(optimizer))
    emit(event="digest", rank=rank, digest=digest(model))
    dist.destroy_process_group()  # DDP: leave the group


if __name__ == "__main__":
    main()
