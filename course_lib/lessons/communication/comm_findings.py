"""What notebook 05 found, in sentences chosen by the verdicts its cells decided (never typed by hand).

Each sentence that states a measured effect is picked here from the verdict that decided it, so a summary
cannot say what the measurement did not show: flip a verdict and the sentence changes
(tests/test_comm_findings.py does that for every one). The notebook prints them as ``measured:`` lines.

Introduced in notebooks/05_communication.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from course_lib.lessons.common.measured import in_words

__all__ = ["STAGES", "STEP_SECTION", "Findings", "summary_lines"]


#: How the summary names the stages of the per-byte table.
STAGES = {"first_touch": "first touch", "without_horovod": "the all-reduce without Horovod"}

#: Where a notebook's budget cannot resolve what a training step's all-reduce costs: the ``make bench`` section.
STEP_SECTION = "10s"


@dataclass(frozen=True)
class Findings:
    """The verdicts notebook 05 decided, and the measured numbers its sentences quote.

    Attributes:
        latency_ratio: Horovod's small all-reduce (Gloo, course setting) over the transport's round trip.
        latency_far_above: That ratio is above 10, decided with its interval.
        largest_part: Name of alpha's largest measured part. largest_share: Its share of alpha.
        largest_decided: That part is larger than every other, decided with the intervals (None: cannot tell).
        cycle_majority: The cycle wait is more than half of alpha (its interval against half).
        additive: The one-factor parts add up: the cycle x dispatch interaction within 10 % of alpha.
        bound_share: ``{controller: (Horovod's 64 MiB all-reduce as a share of the reachable bound, Horovod's share
            below the all-reduce without Horovod's: verdict)}``.
        per_byte: ``{stage: verdict}``: each stage of the path (copy, add, first touch, the all-reduce without
            Horovod) costs more per byte at the large size than at the smaller one.
        horovod_bandwidth_rises: Horovod's bus bandwidth is higher at the large size (its per-byte time lower).
        skew_explains: In the steps after the first, the timeline's negotiations last longer than one cycle:
            one rank waits for the other (a straggler).
        mpi_faster_small: MPI's 4 KiB all-reduce is faster than Gloo's (their ratio's interval against 1).
        mpi_faster_large: The same at 64 MiB.
    """

    latency_ratio: float
    latency_far_above: bool | None
    largest_part: str
    largest_share: float
    cycle_majority: bool | None
    additive: bool | None
    largest_decided: bool | None = None
    bound_share: Mapping[str, tuple[float, bool | None]] = field(default_factory=dict)
    per_byte: Mapping[str, bool | None] = field(default_factory=dict)
    horovod_bandwidth_rises: bool | None = None
    skew_explains: bool | None = None
    mpi_faster_small: bool | None = None
    mpi_faster_large: bool | None = None


def summary_lines(f: Findings) -> list[str]:
    """The summary's measured sentences, each chosen by its verdict (print them as ``measured:`` lines)."""
    lines = [
        f"Horovod's small all-reduce costs ≈{f.latency_ratio:.0f}x the transport's round trip; "
        + in_words(f.latency_far_above, "almost all of its latency is Horovod's own path, not the wire.",
                   "the wire is a visible part of its latency (less than 10 round trips).",
                   "whether it is more than 10 round trips: cannot tell."),
        in_words(f.largest_decided, f"The largest part of α is {f.largest_part} (≈{100 * f.largest_share:.0f} %)",
                 "", f"Which part of α is largest: cannot tell (the largest value, {f.largest_part}, ≈"
                 f"{100 * f.largest_share:.0f} %, is inside another part's interval)") + "; "
        + in_words(f.cycle_majority, "most of α is the cycle wait, paid once per call whatever N.",
                   "the cycle wait is less than half of α.",
                   "whether the cycle wait is more than half of α: cannot tell (its interval holds one half)."),
        in_words(f.additive, "The one-factor parts add up: the cycle's effect does not depend on the dispatch "
                 "(within 10 % of α).",
                 "The one-factor parts do NOT add up: the cycle's effect depends on how the call is dispatched, "
                 "so a part's share holds only at the setting it was measured at.",
                 "Whether the one-factor parts add up: cannot tell (the interaction's interval reaches past 10 % "
                 "of α)."),
    ]
    for controller, (share, below) in f.bound_share.items():
        lines.append(f"{controller}: Horovod's 64 MiB all-reduce reaches ≈{share:.2f} of the bound; "
                     + in_words(below, "the all-reduce without Horovod reaches more: Horovod's own path holds it back.",
                                "as much as the all-reduce without Horovod or more.",
                                "whether the all-reduce without Horovod reaches more: cannot tell."))
    if f.mpi_faster_small and f.mpi_faster_large:
        lines.append("Over MPI the all-reduce is faster than over Gloo for small and large messages alike: where "
                     "Open MPI is installed, `horovodrun --mpi` is the faster controller on one machine.")
    elif f.mpi_faster_small is False and f.mpi_faster_large is False:
        lines.append("Over Gloo the all-reduce is faster than over MPI at both sizes here: keep Gloo.")
    else:
        lines.append("MPI faster than Gloo: at 4 KiB " + in_words(f.mpi_faster_small, "yes", "no") + ", at 64 MiB "
                     + in_words(f.mpi_faster_large, "yes", "no") + ": no controller is faster at both ends here.")
    lines.append("From 16 to 64 MiB, more per byte: "
                 + ", ".join(f"{STAGES.get(stage, stage)} {in_words(v, 'yes', 'no')}" for stage, v in f.per_byte.items())
                 + "; Horovod's bus bandwidth at 64 MiB "
                 + in_words(f.horovod_bandwidth_rises, "is higher: α is spread over 4x the bytes.",
                            "is lower.", "is not told apart from 16 MiB's."))
    lines.append(f"What the all-reduce adds to a training step: cannot tell here (4 steps per epoch per rank); "
                 f"`make bench` section {STEP_SECTION} measures it over rounds.")
    lines.append(in_words(f.skew_explains, "After the first step the negotiation bars last longer than one cycle: "
                          "one rank waits for the other (a straggler), not for the network.",
                          "After the first step the negotiations end within a cycle: no rank waits for the other.",
                          "Whether, after the first step, one rank waits for the other: cannot tell."))
    return lines
