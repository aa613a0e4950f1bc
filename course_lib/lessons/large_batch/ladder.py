"""The large-batch ladder: configurations that each change one thing relative to the row they build on.

A ladder is a list of :class:`Config` rows, each naming the row it builds on; :func:`changes` derives the
"changes" column from the settings themselves, so it cannot disagree with what ran. Notebook 04 runs each row
with the same seeds, so two rows compare *paired* (:mod:`course_lib.lessons.large_batch.ladder_verdicts`). Nothing here
imports TensorFlow.

Introduced in notebooks/04_large_batch.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["Config", "changes"]


@dataclass(frozen=True)
class Config:
    """One configuration of the ablation (a row of the ladder).

    Attributes:
        name: Row label, e.g. ``"+ warm-up"``.
        flags: Script flags, ``{"--lr": "0.001", "--scale-lr": True}`` (``True`` is a switch,
            ``False`` or ``None`` leaves the flag out), or the settings of an in-process run
            (:mod:`course_lib.lessons.large_batch.trials`).
        parent: Name of the row it builds on (``None`` for the baseline).
        workers: Horovod processes for the run.

    Introduced in notebooks/04_large_batch.ipynb.
    """

    name: str
    flags: Mapping[str, Any] = field(default_factory=dict)
    parent: str | None = None
    workers: int = 1

    def args(self) -> list[str]:
        """The flags as a script argument list (``True`` switches give just the flag)."""
        return [part for flag, value in _pairs(self) for part in (flag, value) if part != ""]


def changes(configs: Sequence[Config]) -> dict[str, list[str]]:
    """What each configuration changes relative to its parent, from the flags themselves.

    Args:
        configs: The ladder, parents before children.

    Returns:
        ``{name: ["--lr 0.001 -> 0.008", "+--scale-lr", "---plateau", ...]}`` (``["baseline"]``
        without parent).

    Raises:
        ValueError: Duplicate names, or a parent that is not an earlier configuration.

    Introduced in notebooks/04_large_batch.ipynb.
    """
    table: dict[str, Config] = {}
    result: dict[str, list[str]] = {}
    for config in configs:
        if config.name in table:
            raise ValueError(f"two configurations are named {config.name!r}; names must be unique")
        if config.parent is not None and config.parent not in table:
            raise ValueError(f"{config.name!r} builds on {config.parent!r}, which is not an "
                             "earlier configuration; list the parent first")
        table[config.name] = config
        if config.parent is None:
            result[config.name] = ["baseline"]
            continue
        parent = table[config.parent]
        old, new = dict(_pairs(parent)), dict(_pairs(config))
        diff = [f"-{f}" if f not in new else f"{f} {old[f]} -> {new[f]}"
                for f in old if old[f] != new.get(f)]
        diff += [f"+{f} {v}".rstrip() for f, v in new.items() if f not in old]
        if parent.workers != config.workers:
            diff.append(f"workers {parent.workers} -> {config.workers}")
        result[config.name] = diff
    return result


def _pairs(config: Config) -> list[tuple[str, str]]:
    return [(flag, "" if value is True else str(value)) for flag, value in config.flags.items()
            if value is not None and value is not False]
