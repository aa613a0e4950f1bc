"""Section 10 of ``make bench``: Horovod's all-reduce against the transport's limit, for both controllers.

Every round launches, in an order reversed every other round (A B C D, D C B A: a drift of the machine moves
every setting alike): the transport probe (``source_code/transport_probe.py``: the limit, without Horovod) and
``source_code/allreduce_bench.py`` (4 KiB ... 64 MiB) under each Horovod setting of :func:`settings`. Each row
is the median over the rounds, with the min–max of the rounds; each ratio row divides two figures of the same
round (Horovod's 4 KiB time by the transport's round trip; Horovod's 64 MiB bus bandwidth by one TCP stream's
bandwidth, with the issue-46 goal of 80 %, and by the all-reduce without Horovod on the same transport, which
says whether the path or Horovod holds it below the goal). Issue 52: one stream is not a limit a 2-rank
all-reduce can reach on loopback; each Horovod launch also measures the reachable bound (``--bound``: two
exchanges of S/2 each way at once and the add of S/2 on the controller's own transport) and the rows put
Horovod's and the bare all-reduce's 64 MiB time against it, as "x of the bound".

Plain Python except the launches (``run_section``); the rows are tested on synthetic rounds
(tests/test_benchmarks_allreduce.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from benchmarks.report import rate_row, ratio_row
from benchmarks.stats import Row, median

__all__ = ["Setting", "settings", "round_order", "run_section", "rows", "SMALL", "LARGE"]

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "source_code" / "transport_probe.py"
BENCH = REPO / "source_code" / "allreduce_bench.py"
SMALL, LARGE = 4096, 64 * 2 ** 20
#: Which transport each controller's bytes go over on one machine (the probe's names).
TRANSPORT = {"gloo": "tcp", "mpi": "mpi"}


@dataclass(frozen=True)
class Setting:
    """One Horovod setting of the sweep."""

    name: str
    label: str
    controller: str
    env: dict[str, str] = field(default_factory=dict)


def settings(course_env: Mapping[str, str]) -> list[Setting]:
    """The course's setting (Gloo) and the candidates it is compared with: MPI at the same cycle, and at 1 ms."""
    return [Setting("gloo_course", f"gloo, {dict(course_env)} (course default)", "gloo", dict(course_env)),
            Setting("mpi_course", f"mpi, {dict(course_env)}", "mpi", dict(course_env)),
            Setting("mpi_cycle1", "mpi, {'HOROVOD_CYCLE_TIME': '1'}", "mpi", {"HOROVOD_CYCLE_TIME": "1"})]


def round_order(names: Sequence[str], index: int) -> list[str]:
    """The launches of round ``index``: ``names`` in order, reversed every other round."""
    return list(names) if index % 2 == 0 else list(names)[::-1]


def _key(what: str, transport: str, nbytes: int) -> str:
    return f"{what}/{transport}/{nbytes}"


def run_section(chosen: Sequence[Setting], *, rounds: int, repeats: int, probe_rounds: int, timeout_s: float,
                printer: Callable[[str], None]) -> dict[str, dict[str, list[float]]]:
    """Launch every round; returns ``{"probe": {what/transport/bytes: [s per round]}, setting: {bytes: [s]}}``.

    A failed launch leaves NaN for its round (its error printed), so the rounds stay paired.
    """
    from course_lib.runner import launch

    samples: dict[str, dict[str, list[float]]] = {"probe": {}, **{s.name: {} for s in chosen}}
    by_name = {s.name: s for s in chosen}
    for r in range(rounds):
        for name in round_order(["probe", *by_name], r):
            printer(f"[section 10, round {r + 1} of {rounds}] {name}")
            try:
                if name == "probe":
                    result = launch.run_horovod(PROBE, ["--json", "--rounds", str(probe_rounds)], workers=2,
                                                horovodrun=launch.Horovodrun(controller="mpi"),
                                                show="none", timeout=timeout_s, cwd=REPO)
                    found = {_key(e["what"], e["transport"], int(e["bytes"])): sum(e["seconds"]) / len(e["seconds"])
                             for _, e in result.events if e.get("event") == "transport"}
                else:
                    s = by_name[name]
                    result = launch.run_horovod(BENCH, ["--json", "--repeats", str(repeats), "--bound"], workers=2,
                                                horovodrun=launch.Horovodrun(controller=s.controller),
                                                env={"TF_CPP_MIN_LOG_LEVEL": "2", **s.env}, show="none",
                                                timeout=timeout_s, cwd=REPO)
                    found = {str(int(e["bytes"])): float(e["median_s"]) for _, e in result.events
                             if e.get("event") == "allreduce"}
                    for _, e in result.events:       # the reachable bound, measured in the same launch
                        if e.get("event") == "bound":
                            found["bound"] = 2 * _mean(e["exchange_s"]) + _mean(e["add_s"])
                            found["bare"] = _mean(e["bare_s"])
            except launch.RunFailedError as exc:
                printer(f"!! {name} failed: {exc}")
                found = {}
            table = samples[name]
            for key in set(table) | set(found):
                table.setdefault(key, [math.nan] * r).append(found.get(key, math.nan))
    return samples


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _rates(seconds: Sequence[float], nbytes: int) -> list[float]:
    """GB/s of ``nbytes`` moved in each round's time (busbw of a 2-rank all-reduce: the ring factor is 1)."""
    return [nbytes / s / 1e9 if math.isfinite(s) and s > 0 else math.nan for s in seconds]


def rows(samples: Mapping[str, Mapping[str, Sequence[float]]], chosen: Sequence[Setting]) -> list[Row]:
    """Section 10's rows: the limit, then per setting its latency and bandwidth and their ratios to the limit."""
    probe = samples.get("probe", {})
    out: list[Row] = []

    def got(what: str, transport: str, nbytes: int) -> list[float]:
        return list(probe.get(_key(what, transport, nbytes), []))

    stream = _rates(got("one_way", "tcp", LARGE), LARGE)
    for transport, name in (("tcp", "TCP loopback"), ("mpi", "MPI shared memory")):
        trip = got("round_trip", transport, SMALL)
        if trip:
            out.append(rate_row("10", f"limit: 4 KiB round trip, {name}", [t * 1e6 for t in trip], unit="us",
                                digits=1))
        if got("one_way", transport, LARGE):
            out.append(rate_row("10", f"limit: one 64 MiB message, {name}", _rates(got("one_way", transport, LARGE),
                                                                                     LARGE), unit="GB/s", digits=2))
        bare = _rates(got("allreduce", transport, LARGE), LARGE)
        if bare and stream:
            out.append(rate_row("10", f"limit: 64 MiB all-reduce without Horovod, {name} (busbw)", bare,
                                unit="GB/s", digits=2))
            out.append(ratio_row("10", f"all-reduce without Horovod ({name}) / one TCP stream, 64 MiB", bare,
                                 stream, note="for scale only: one stream moves each byte once and adds nothing, so "
                                 "no all-reduce can reach it (the reachable bound is below)"))
    for what in ("copy", "add", "fresh_fill"):
        if got(what, "memory", LARGE):
            out.append(rate_row("10", f"limit: memory {what.replace('_', ' ')} of 64 MiB (both ranks at once)",
                                _rates(got(what, "memory", LARGE), LARGE), unit="GB/s", digits=2))
    for s in chosen:
        sweep = samples.get(s.name, {})
        small, large = list(sweep.get(str(SMALL), [])), list(sweep.get(str(LARGE), []))
        transport = TRANSPORT[s.controller]
        if not small or not large:
            out.append(Row("10", f"Horovod all-reduce, {s.label}", note="not measured: see the run's output"))
            continue
        out.append(rate_row("10", f"Horovod 4 KiB all-reduce, {s.label}", [t * 1e3 for t in small], unit="ms",
                            digits=2))
        trip = got("round_trip", transport, SMALL)
        if trip:
            out.append(ratio_row("10", f"4 KiB latency / {transport} round trip, {s.label}", small, trip,
                                 percent=False, note="x the transport's round trip"))
        busbw = _rates(large, LARGE)
        out.append(rate_row("10", f"Horovod 64 MiB bus bandwidth, {s.label}", busbw, unit="GB/s", digits=2))
        if stream:
            out.append(ratio_row("10", f"64 MiB busbw / one TCP stream, {s.label}", busbw, stream,
                                 note="for scale only: not a reachable limit (issue 52)"))
        bare = _rates(got("allreduce", transport, LARGE), LARGE)
        if bare:
            out.append(ratio_row("10", f"64 MiB busbw / all-reduce without Horovod on {transport}, {s.label}",
                                 busbw, bare, note="Horovod's own share of the gap"))
        bound = list(sweep.get("bound", []))
        if bound:
            out.append(ratio_row("10", f"64 MiB: the reachable bound / Horovod's time, {s.label}", bound, large,
                                 percent=False, note="of the bound: two exchanges of 32 MiB each way + the add of "
                                 "32 MiB, on the controller's own transport, same launch (notebook 05)"))
            out.append(ratio_row("10", f"64 MiB: the reachable bound / without Horovod's time, {s.label}", bound,
                                 list(sweep.get("bare", [])), percent=False,
                                 note="above 1 would mean the bound is not one"))
        out += _fit_rows(s, sweep)
    return out


def _fit_rows(s: Setting, sweep: Mapping[str, Sequence[float]]) -> list[Row]:
    """alpha and beta of the medians over the rounds (relative-error fit, notebook 05)."""
    from course_lib.lessons.communication import allreduce_model

    sizes = sorted(int(k) for k in sweep if k.isdigit())
    times = [median(list(sweep[str(n)])) for n in sizes]
    pairs = [(n, t) for n, t in zip(sizes, times) if math.isfinite(t)]
    try:
        fit = allreduce_model.fit_alpha_beta([n for n, _ in pairs], [t for _, t in pairs], 2)
    except ValueError as exc:
        return [Row("10", f"alpha-beta fit, {s.label}", note=f"no fit: {exc}")]
    note = f"T(S) = alpha + 2(N-1)/N S / beta, medians over the rounds; rms misfit {fit.rms_relative_error:.0%}"
    return [Row("10", f"alpha (latency), {s.label}", fit.alpha_s * 1e3, None, "ms", len(pairs), note=note, digits=2),
            Row("10", f"beta (bandwidth), {s.label}", fit.beta_bytes_per_s / 1e9, None, "GB/s", len(pairs),
                note=note, digits=2)]
