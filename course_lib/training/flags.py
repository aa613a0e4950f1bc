"""Command-line flag types shared by the training scripts.

The scripts parse and check their flags before TensorFlow (or Horovod) starts, so that a bad
flag fails in a fraction of a second with argparse's usual one-line error.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["OPTIMIZERS", "HelpFormatter", "positive_int", "non_negative_int", "positive_float",
           "add_training_flags", "add_data_flags", "add_worker_flags", "add_run_flags"]

OPTIMIZERS = ("adam", "sgd", "lars", "lamb")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` shows every default, and keeps the epilog's example command on one line.

    A help text that already says its default in words ("default: all 60000") is left as it is,
    and so are flags whose default is None or False (nothing useful to add).
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False:
            return text
        return super()._get_help_string(action) or text


def _parse_number(text: str, kind: type, minimum: float, what: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum or (kind is float and not math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return int(_parse_number(text, int, 1, "an integer >= 1"))


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return int(_parse_number(text, int, 0, "an integer >= 0"))


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = float(_parse_number(text, float, 0.0, "a number > 0"))
    if value == 0.0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def add_training_flags(parser: argparse.ArgumentParser, *, batch_size: int, epochs: int, per: str = "worker",
                       lr_help: str = "learning rate (before --scale-lr)",
                       scale_lr_help: str | None = "multiply the learning rate by the number of workers") -> None:
    """Add ``--batch-size``, ``--epochs``, ``--lr`` and ``--scale-lr``: one type and one meaning in every script.

    Args:
        parser: The script's parser.
        batch_size: Default per-worker (or per-replica) batch: each script's own, for its run time.
        epochs: Default epochs (passes over the training set by all workers together).
        per: What takes one batch per step: ``"worker"`` or ``"replica"``.
        lr_help: Help of ``--lr`` (default 0.001): what the script does with it.
        scale_lr_help: Help of ``--scale-lr``; ``None``: the script has no such switch.
    """
    parser.add_argument("--batch-size", type=positive_int, default=batch_size,
                        help=f"batch size PER {per.upper()}; the global batch is this x {per}s")
    parser.add_argument("--epochs", type=positive_int, default=epochs,
                        help="total epochs (passes over the training set by all workers together)")
    parser.add_argument("--lr", type=positive_float, default=1e-3, help=lr_help)
    if scale_lr_help is not None:
        parser.add_argument("--scale-lr", action="store_true", help=scale_lr_help)


def add_data_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--data-dir`` (the tfds data folder), ``--train-subset`` and ``--test-subset`` (the first N
    images of each split): the data flags every training script declares the same way.

    Args:
        parser: The script's parser.
    """
    parser.add_argument("--data-dir", default=None,
                        help="tfds data folder (as tfds.load(data_dir=)); default: $COURSE_TFDS_DIR, "
                        "else $TFDS_DATA_DIR, else ~/tensorflow_datasets "
                        "(course_lib.training.data.resolve_data_dir)")
    parser.add_argument("--train-subset", type=positive_int, default=None,
                        help="train on the first N training images only (default: all 60000)")
    parser.add_argument("--test-subset", type=positive_int, default=None,
                        help="evaluate on the first N test images only (default: all 10000)")


def add_worker_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--threads-per-worker`` the same way to every multi-worker script (one default, one meaning).

    The default, ``None``, lets :func:`course_lib.training.machine.placement.worker_share` decide: the cores the
    launcher granted this worker, else the cores it claimed, else its share of the host's cores.

    Args:
        parser: The script's parser.

    Introduced in notebooks/03_horovod.ipynb.
    """
    parser.add_argument("--threads-per-worker", type=positive_int, default=None,
                        help="CPU threads of each worker (default: the cores it was granted or "
                        "claimed; without either, cores / workers on the host)")


def add_run_flags(parser: argparse.ArgumentParser, *, precision: bool = True, throughput: bool = True) -> None:
    """Add the flags every course script shares: seed and JSON lines; precision and determinism; the
    epochs left out of the throughput mean.

    Args:
        parser: The script's parser.
        precision: Add ``--mixed-precision`` and ``--deterministic`` (scripts that support them).
        throughput: Add ``--throughput-warmup-epochs`` (scripts that measure images/s).
    """
    parser.add_argument("--seed", type=int, default=42,
                        help="seed of the weights, the data order and dropout")
    if precision:
        parser.add_argument("--mixed-precision", action="store_true",
                            help="compute in float16 (mixed_float16; useful on GPUs only)")
        parser.add_argument("--deterministic", action="store_true",
                            help="enable TensorFlow op determinism (bit-identical reruns, slower)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON lines (config, epoch, ..., result, digest: docs/architecture.md)")
    if throughput:
        parser.add_argument("--throughput-warmup-epochs", type=non_negative_int, default=1,
                            help="first epochs left out of the images/s mean (tracing, caches)")
