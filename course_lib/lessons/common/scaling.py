"""Run records → speed-up / efficiency tables and plots; JSON persistence.

Speed-up ``S_N = T_N / T_1`` and efficiency ``E_N = T_N / (N × T_1)``, where ``T_N`` is the
throughput (images/s) with N devices. Weak scaling keeps the per-device batch fixed (the global
batch grows with N); strong scaling keeps the global batch fixed. A table mixes one or the
other, never both. :func:`scaling_table` takes each run's own interval; for two runs measured in the same
rounds, :func:`course_lib.lessons.mirrored_strategy.mirrored_rounds.scaling_pair` and
:func:`course_lib.lessons.common.paired_runs.paired_scaling_table` give the paired one.

Introduced in notebooks/02_mirrored_strategy.ipynb.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from course_lib.training.files import atomic_write_json
from course_lib.training.stats import scaling_efficiency

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure
    import pandas

__all__ = ["RunRecord", "MixedScalingError", "to_record", "scaling_table", "plot_scaling",
           "save_records", "load_records"]

_DEVICE_KEYS = ("devices", "workers")
_BATCH_KEYS = ("per_device_batch", "per_worker_batch", "batch_size_per_replica")
_KNOWN_KEYS = set(_DEVICE_KEYS) | set(_BATCH_KEYS) | {"global_batch", "images_per_sec", "label",
                                                       "strategy", "extra", "event"}


class MixedScalingError(ValueError):
    """Records mix weak scaling (fixed per-device batch) and strong scaling (fixed global batch)."""


@dataclass
class RunRecord:
    """One measured run.

    Attributes:
        devices: Devices (replicas or Horovod workers), N.
        per_device_batch: Batch per device.
        global_batch: Batch per step over all devices.
        images_per_sec: Measured throughput, all devices.
        label: Free text.
        strategy: ``"mirrored"``, ``"horovod"``, ...
        extra: Anything else (e.g. the other keys of a ``result`` event).
    """

    devices: int
    per_device_batch: int
    global_batch: int
    images_per_sec: float
    label: str = ""
    strategy: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("devices", "per_device_batch", "global_batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"RunRecord.{name} must be an int >= 1, got {value!r}")
            setattr(self, name, int(value))
        rate = float(self.images_per_sec)
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"RunRecord.images_per_sec must be a positive number, got "
                             f"{self.images_per_sec!r}")
        self.images_per_sec = rate


def _first(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key]
    return None


def to_record(obj: Any, label: str | None = None) -> RunRecord:
    """Turn a run description into a :class:`RunRecord`.

    Args:
        obj: A ``RunRecord``; a dict with ``devices`` or ``workers``, ``per_device_batch`` or
            ``per_worker_batch`` or ``batch_size_per_replica``, ``global_batch`` (default
            per-device batch × devices), ``images_per_sec`` and optionally ``label``,
            ``strategy`` (e.g. the ``result`` event of docs/architecture.md; other keys go to
            ``extra``); or the launcher's ``RunResult`` (its ``result`` event is used).
        label: Label of the record (e.g. ``"horovod"``), replacing any label in ``obj``.

    Returns:
        The record.

    Raises:
        ValueError: A required key is missing or a value is invalid, or a run printed no
            ``result`` event.
        TypeError: ``obj`` is none of the above.
    """
    if isinstance(obj, RunRecord):
        return obj if label is None else replace(obj, label=label)
    if not isinstance(obj, Mapping) and hasattr(obj, "events") and hasattr(obj, "result"):
        if obj.result is None:
            raise ValueError("this run printed no JSON 'result' event, so it has no throughput "
                             "record; run the script with --json (see docs/architecture.md)")
        obj = dict(obj.result)
    if not isinstance(obj, Mapping):
        raise TypeError(f"cannot make a RunRecord from {type(obj).__name__}; pass a RunRecord, a "
                        "dict or the launcher's RunResult")
    if label is not None:
        obj = {**obj, "label": label}
    devices = _first(obj, _DEVICE_KEYS)
    per_device = _first(obj, _BATCH_KEYS)
    missing = [name for name, value in (("devices|workers", devices),
                                        ("per_device_batch|per_worker_batch|"
                                         "batch_size_per_replica", per_device),
                                        ("images_per_sec", obj.get("images_per_sec")))
               if value is None]
    if missing:
        raise ValueError(f"run description lacks {', '.join(missing)}: {dict(obj)!r}")
    global_batch = obj.get("global_batch")
    if global_batch is None:
        global_batch = int(per_device) * int(devices)
    extra = dict(obj.get("extra") or {})
    extra.update({k: v for k, v in obj.items() if k not in _KNOWN_KEYS})
    return RunRecord(devices=devices, per_device_batch=per_device, global_batch=global_batch,
                     images_per_sec=obj["images_per_sec"], label=str(obj.get("label") or ""),
                     strategy=str(obj.get("strategy") or ""), extra=extra)


def _detect_mode(records: list[RunRecord]) -> tuple[bool, bool]:
    weak = len({r.per_device_batch for r in records}) == 1
    strong = len({r.global_batch for r in records}) == 1
    return weak, strong


def scaling_table(records: Iterable[Any], *, mode: str | None = None) -> "pandas.DataFrame":
    """Speed-up and efficiency per number of devices.

    Several records with the same N are reduced to the MEDIAN of their images/s (robust to one
    disturbed run); the column ``runs`` says how many were reduced.

    Args:
        records: Anything :func:`to_record` accepts. Must include a 1-device baseline.
        mode: ``"weak"`` or ``"strong"`` to insist on one; None detects it (weak when every
            record has the same per-device batch, strong when every record has the same global
            batch; the 1-device baseline belongs to both when its batches match).

    Returns:
        DataFrame sorted by devices with columns ``devices, per_device_batch, global_batch,
        images_per_sec, speedup, efficiency, mode, runs, efficiency_ci95, images_per_sec_ci95``.
        ``efficiency_ci95`` is the half-width of the efficiency's 95 % interval, propagated from
        the runs' own ``images_per_sec_ci95`` (relative errors of T_N and T_1 added in quadrature;
        the speed-up's is N times it); both are NaN where a run did not report one or several
        runs were reduced to their median.

    Raises:
        ValueError: No records, no 1-device baseline, or unknown ``mode``.
        MixedScalingError: The records are neither all weak nor all strong scaling (or not the
            ``mode`` asked for).
    """
    import pandas as pd

    if mode not in (None, "weak", "strong"):
        raise ValueError(f"mode must be 'weak', 'strong' or None, got {mode!r}")
    recs = [to_record(r) for r in records]
    if not recs:
        raise ValueError("scaling_table needs at least one run record (with devices=1)")
    if not any(r.devices == 1 for r in recs):
        raise ValueError("scaling_table needs a 1-device baseline run to compute speed-up; found "
                         f"devices={sorted({r.devices for r in recs})}. Run once with 1 device.")
    weak, strong = _detect_mode(recs)
    listing = "; ".join(f"N={r.devices} per-device {r.per_device_batch} global {r.global_batch}"
                        for r in sorted(recs, key=lambda r: r.devices))
    if mode == "weak" and not weak:
        raise MixedScalingError(f"weak scaling needs one per-device batch for all runs: {listing}")
    if mode == "strong" and not strong:
        raise MixedScalingError(f"strong scaling needs one global batch for all runs: {listing}")
    if not weak and not strong:
        raise MixedScalingError(
            "records mix weak scaling (fixed per-device batch) and strong scaling (fixed global "
            f"batch), or vary both: {listing}. Make one table per kind.")
    chosen = mode or ("weak" if weak else "strong")
    frame = pd.DataFrame([asdict(r) for r in recs])
    # A run whose mean counts one epoch reports images_per_sec_ci95 = null: no interval, NaN.
    frame["ci95"] = [math.nan if r.extra.get("images_per_sec_ci95") is None
                     else float(r.extra["images_per_sec_ci95"]) for r in recs]
    grouped = (frame.groupby("devices", sort=True)
               .agg(per_device_batch=("per_device_batch", "first"),
                    global_batch=("global_batch", "first"),
                    images_per_sec=("images_per_sec", "median"),
                    runs=("images_per_sec", "size"),
                    ci95=("ci95", "first"))
               .reset_index())
    grouped.loc[grouped["runs"] > 1, "ci95"] = math.nan
    baseline = float(grouped.loc[grouped["devices"] == 1, "images_per_sec"].iloc[0])
    base_ci = float(grouped.loc[grouped["devices"] == 1, "ci95"].iloc[0])
    itself = 0.0 if not math.isnan(base_ci) else math.nan  # the baseline against itself: no uncertainty
    pairs = [scaling_efficiency(float(rate), baseline, int(n), ci95_n=float(ci) if n > 1 else itself,
                                ci95_1=base_ci if n > 1 else itself)
             for n, rate, ci in zip(grouped["devices"], grouped["images_per_sec"], grouped["ci95"])]
    grouped["speedup"] = grouped["images_per_sec"] / baseline
    grouped["efficiency"] = [eff for eff, _ in pairs]
    grouped["mode"] = chosen
    grouped["efficiency_ci95"] = [half for _, half in pairs]
    grouped["images_per_sec_ci95"] = grouped["ci95"]
    return grouped[["devices", "per_device_batch", "global_batch", "images_per_sec", "speedup",
                    "efficiency", "mode", "runs", "efficiency_ci95", "images_per_sec_ci95"]]


def plot_scaling(table: "pandas.DataFrame", *, title: str = "",
                 yardstick: tuple[str, float] | None = None, linear: bool = True) -> "matplotlib.figure.Figure":
    """Throughput vs N with the ideal line, and efficiency vs N, side by side, with error bars.

    Each measured point carries its 95 % interval where the table has one (``images_per_sec_ci95``,
    ``efficiency_ci95``); a point without one is drawn without a bar. The efficiency's interval of a
    paired table (``table.attrs["paired"]``, :mod:`course_lib.lessons.common.paired_runs`,
    :mod:`course_lib.lessons.mirrored_strategy.mirrored_rounds`) is the paired one, and
    its legend says so.

    Args:
        table: From :func:`scaling_table`.
        title: Figure title.
        yardstick: ``(label, images/s)`` of a measured run to compare with, drawn as a horizontal line on the
            throughput panel (notebook 02: one process on every core with the same global batch, which a
            distributed run can beat: not a bound).
        linear: Draw N × the 1-device rate ("linear") and 100 % efficiency. ``False`` where the devices share
            the same cores (notebook 02's simulated CPU devices): no run can reach that line there, so it would
            read as an inefficiency that is not one; the bound (:mod:`course_lib.lessons.common.efficiency`) is
            the line to compare with.

    Returns:
        A ``matplotlib.figure.Figure`` (not registered with pyplot): show it with
        :func:`course_lib.lessons.common.display.show_figure` (returned bare, Jupyter prints only its
        text ``<Figure size ...>``).
    """
    from matplotlib.figure import Figure

    def bars(column: str, scale: float = 1.0) -> list[float] | None:
        if column not in table:
            return None
        values = [float(v) * scale for v in table[column]]
        return None if all(math.isnan(v) for v in values) else [0.0 if math.isnan(v) else v for v in values]

    devices = [int(n) for n in table["devices"]]
    rates = [float(v) for v in table["images_per_sec"]]
    baseline = rates[devices.index(1)] if 1 in devices else rates[0] / devices[0]
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax_rate, ax_eff = fig.subplots(1, 2)
    paired = bool(table.attrs.get("paired"))
    if linear:
        ax_rate.plot(devices, [baseline * n for n in devices], "--", color="grey", label="linear (N × 1 device)")
    ax_rate.errorbar(devices, rates, yerr=bars("images_per_sec_ci95"), fmt="o-", capsize=4,
                     label="measured (95 % interval of each run)" if paired else "measured (95 % interval)")
    if yardstick is not None:
        ax_rate.axhline(yardstick[1], linestyle=":", color="tab:red", label=yardstick[0])
    ax_rate.set_xlabel("devices N")
    ax_rate.set_ylabel("images / s")
    ax_rate.set_xticks(devices)
    ax_rate.set_ylim(bottom=0)
    ax_rate.legend()
    if linear:
        ax_eff.axhline(100.0, linestyle="--", color="grey", label="linear")
    ax_eff.errorbar(devices, [100.0 * float(e) for e in table["efficiency"]], yerr=bars("efficiency_ci95", 100.0),
                    fmt="o-", capsize=4, label="measured (paired 95 % interval, the verdict's)" if paired
                    else "measured (95 % interval)")
    ax_eff.set_xlabel("devices N")
    ax_eff.set_ylabel("scaling efficiency (%)")
    ax_eff.set_xticks(devices)
    ax_eff.set_ylim(bottom=0)
    ax_eff.legend()
    mode = str(table["mode"].iloc[0]) if "mode" in table and len(table) else ""
    fig.suptitle(title or (f"{mode} scaling" if mode else "scaling"))
    return fig


def save_records(path: str | os.PathLike[str], records: Iterable[Any]) -> Path:
    """Write records as a JSON list, atomically.

    Args:
        path: Target file.
        records: Anything :func:`to_record` accepts.

    Returns:
        The path written.
    """
    return atomic_write_json(path, [asdict(to_record(r)) for r in records])


def load_records(path: str | os.PathLike[str]) -> list[RunRecord]:
    """Read records written by :func:`save_records`.

    Args:
        path: The JSON file.

    Returns:
        The records, in file order.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: The file is not a JSON list of run records.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); delete it or fix it") from exc
    if not isinstance(items, list):
        raise ValueError(f"{path} must hold a JSON list of run records, got {type(items).__name__}")
    return [to_record(item) for item in items]
