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
from course_lib.training.stats import CANNOT_TELL

__all__ = ["Findings", "summary_lines"]


@dataclass(frozen=True)
class Findings:
    """The verdicts notebook 05 decided, and the measured numbers its sentences quote.

    Attributes:
        latency_ratio: Horovod's small all-reduce (Gloo, course setting) over the transport's round trip.
        latency_far_above: That ratio is above 10, decided with its interval.
        largest_part: Name of alpha's largest measured part. largest_share: Its share of alpha.
        cycle_majority: The cycle wait is more than half of alpha (its interval against half).
        parts_add_up: The parts add up to the alpha of the separate sweep, within the intervals.
        busbw_share: ``{controller: (64 MiB bus bandwidth / one TCP stream, at least 80 %: verdict)}``.
        memory_slower: Copies and adds cost more per byte at the large size than at the smaller one.
        without_horovod_slower: The all-reduce without Horovod also costs more per byte at the large size.
        step_verdict: The training step with the all-reduce against without it: slower / faster / cannot tell.
        step_ratio: Its ratio of step times.
        skew_explains: The timeline's negotiations are mostly the wait for the other rank (a straggler).
        mpi_faster_small: MPI's 4 KiB all-reduce is faster than Gloo's (their ratio's interval against 1).
        mpi_faster_large: The same at 64 MiB.
    """

    latency_ratio: float
    latency_far_above: bool | None
    largest_part: str
    largest_share: float
    cycle_majority: bool | None
    parts_add_up: bool | None
    busbw_share: Mapping[str, tuple[float, bool | None]] = field(default_factory=dict)
    memory_slower: bool | None = None
    without_horovod_slower: bool | None = None
    step_verdict: str = CANNOT_TELL
    step_ratio: float = float("nan")
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
        f"The largest part of α is {f.largest_part} (≈{100 * f.largest_share:.0f} %); "
        + in_words(f.cycle_majority, "most of α is the cycle wait, paid once per call whatever N.",
                   "the cycle wait is less than half of α.",
                   "whether the cycle wait is more than half of α: cannot tell (its interval holds one half)."),
        in_words(f.parts_add_up, "The measured parts add up to the α of the separate sweep, within their intervals.",
                 "The measured parts do NOT add up to the α of the separate sweep: something this experiment did not "
                 "vary (or a drift between the launches) holds the difference.",
                 "Whether the parts add up to the sweep's α: cannot tell (an interval is unknown)."),
    ]
    for controller, (share, enough) in f.busbw_share.items():
        lines.append(f"{controller}: at 64 MiB the bus bandwidth is ≈{100 * share:.0f} % of one TCP stream; "
                     + in_words(enough, "at least 80 % of it.", "below 80 % of it."))
    if f.mpi_faster_small and f.mpi_faster_large:
        lines.append("Over MPI the all-reduce is faster than over Gloo for small and large messages alike: where "
                     "Open MPI is installed, `horovodrun --mpi` is the faster controller on one machine.")
    elif f.mpi_faster_small is False and f.mpi_faster_large is False:
        lines.append("Over Gloo the all-reduce is faster than over MPI at both sizes here: keep Gloo.")
    else:
        lines.append("MPI faster than Gloo: at 4 KiB " + in_words(f.mpi_faster_small, "yes", "no") + ", at 64 MiB "
                     + in_words(f.mpi_faster_large, "yes", "no") + ": no controller is faster at both ends here.")
    if f.memory_slower is not None or f.without_horovod_slower is not None:
        if f.memory_slower and f.without_horovod_slower:
            lines.append("From 16 to 64 MiB the bus bandwidth falls with the machine's memory: copies and adds cost "
                         "more per byte, and the all-reduce without Horovod slows down alike.")
        elif f.without_horovod_slower is False:
            lines.append("From 16 to 64 MiB the all-reduce without Horovod does not slow down per byte: the fall of "
                         "Horovod's bus bandwidth is in Horovod's own path.")
        else:
            lines.append("From 16 to 64 MiB: memory per byte "
                         + in_words(f.memory_slower, "slower", "not slower") + ", the all-reduce without Horovod "
                         + in_words(f.without_horovod_slower, "slower", "not slower") + " per byte.")
    lines.append(f"A training step with the all-reduce against without it: {f.step_verdict} "
                 f"(≈{f.step_ratio:.2f}x)" + {"slower": ": the all-reduce costs the step time.",
                                              "faster": ": faster WITH the all-reduce, which only noise explains.",
                                              CANNOT_TELL: ": the all-reduce's cost is inside this machine's noise."}
                 .get(f.step_verdict, "."))
    lines.append(in_words(f.skew_explains, "The long negotiation bars of the timeline are one rank waiting for the "
                          "other (a straggler), not the network.",
                          "The timeline's negotiations are not mostly a wait for the other rank.",
                          "Whether the timeline's negotiations are mostly a wait for the other rank: cannot tell."))
    return lines
