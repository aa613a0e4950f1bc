"""JSON lines: the events the training scripts print for the launcher (docs/architecture.md).

One owner for two things every script needs: printing an event as one strict-JSON line, and
turning numpy / NaN values into what strict JSON accepts (``null`` for NaN and infinity).

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import json
import math
import sys
from typing import IO, Any

__all__ = ["json_safe", "emit", "dumps"]


def json_safe(value: Any) -> Any:
    """Make a value strict-JSON safe: numpy scalars become Python ones, NaN/inf become None.

    Lists, tuples and dicts are converted recursively.

    Args:
        value: Any JSON-like value, possibly holding numpy scalars or non-finite floats.

    Returns:
        The same value with every non-finite float replaced by ``None``.
    """
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    return value


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`json_safe` (``allow_nan=False``: a stray NaN raises)."""
    return json.dumps(json_safe(obj), allow_nan=False, **kwargs)


def emit(event: str, enabled: bool = True, stream: IO[str] | None = None, **fields: Any) -> None:
    """Print one JSON line ``{"event": event, **fields}`` and flush.

    Args:
        event: Event name (``config``, ``epoch``, ``checkpoint``, ``resume``, ``result``, ``digest``).
        enabled: Print only when True (the scripts pass ``args.json``).
        stream: Where to print; standard output by default.
        **fields: JSON values (numpy scalars and NaN are converted by :func:`json_safe`).
    """
    if enabled:
        print(dumps({"event": event, **fields}), file=stream or sys.stdout, flush=True)
