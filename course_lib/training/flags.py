"""Command-line flag types shared by the training scripts.

The scripts parse and check their flags before TensorFlow (or Horovod) starts, so that a bad
flag fails in a fraction of a second with argparse's usual one-line error.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["OPTIMIZERS", "HelpFormatter", "positive_int", "non_negative_int", "positive_float"]

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
