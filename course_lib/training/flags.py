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
           "add_data_flags", "add_run_flags"]

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

    The default, ``None``, lets :func:`course_lib.training.placement.worker_share` decide: the cores the
    launcher granted this worker, else the cores it claimed, else its share of the host's cores.

    Args:
        parser: The script's parser.

    Introduced in notebooks/03_horovod.ipynb.
    """
    parser.add_argument("--threads-per-worker", type=positive_int, default=None,
                        help="CPU threads of each worker (default: the cores it was granted or "
                        "claimed; without either, cores / workers on the host)")


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """Add the flags every course script shares: seed, precision, determinism, JSON lines, and the
    epochs left out of the throughput mean.

    Args:
        parser: The script's parser.
    """
    parser.add_argument("--seed", type=int, default=42,
                        help="seed of the weights, the data order and dropout")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="compute in float16 (mixed_float16; useful on GPUs only)")
    parser.add_argument("--deterministic", action="store_true",
                        help="enable TensorFlow op determinism (bit-identical reruns, slower)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON lines (config, epoch, ..., result, digest: docs/architecture.md)")
    parser.add_argument("--throughput-warmup-epochs", type=non_negative_int, default=1,
                        help="first epochs left out of the images/s mean (tracing, caches)")
