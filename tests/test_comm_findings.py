"""Tests of course_lib.lessons.communication.comm_findings: every summary sentence of notebook 05 follows its
verdict."""

from __future__ import annotations

import dataclasses

import pytest

from course_lib.lessons.communication.comm_findings import Findings, summary_lines

BASE = Findings(latency_ratio=300.0, latency_far_above=True, largest_part="cycle wait", largest_share=0.57,
                cycle_majority=True, parts_add_up=True, busbw_share={"gloo": (0.36, False), "mpi": (0.85, True)},
                memory_slower=True, without_horovod_slower=True, step_verdict="slower", step_ratio=1.1,
                skew_explains=True, mpi_faster_small=True, mpi_faster_large=True)

# field -> the other values it can take; every one must change the summary
FLIPS = {
    "latency_far_above": [False, None],
    "cycle_majority": [False, None],
    "parts_add_up": [False, None],
    "busbw_share": [{"gloo": (0.36, True), "mpi": (0.85, True)}, {"gloo": (0.36, None), "mpi": (0.85, True)}],
    "memory_slower": [False, None],
    "without_horovod_slower": [False, None],
    "step_verdict": ["faster", "cannot tell"],
    "skew_explains": [False, None],
    "mpi_faster_small": [False, None],
    "mpi_faster_large": [False, None],
}


@pytest.mark.parametrize("field, value", [(f, v) for f, values in FLIPS.items() for v in values])
def test_flipping_a_verdict_changes_its_sentence(field, value):
    before = summary_lines(BASE)
    after = summary_lines(dataclasses.replace(BASE, **{field: value}))
    assert before != after
    changed = [b for b, a in zip(before, after) if b != a]
    assert len(changed) == 1, changed        # one verdict, one sentence


def test_the_sentences_say_what_their_verdicts_decided():
    text = "\n".join(summary_lines(BASE))
    assert "most of α is the cycle wait" in text
    assert "gloo: at 64 MiB the bus bandwidth is ≈36 % of one TCP stream; below 80 % of it." in text
    assert "mpi: at 64 MiB the bus bandwidth is ≈85 % of one TCP stream; at least 80 % of it." in text
    assert "falls with the machine's memory" in text
    low = "\n".join(summary_lines(dataclasses.replace(BASE, cycle_majority=False, largest_part="negotiation")))
    assert "most of α is the cycle wait" not in low and "less than half of α" in low   # the E-1 case
    assert "Horovod's own path" in summary_lines(dataclasses.replace(BASE, without_horovod_slower=False))[6]
    assert "`horovodrun --mpi` is the faster controller" in text
    gloo = dataclasses.replace(BASE, mpi_faster_small=False, mpi_faster_large=False)
    assert "keep Gloo" in "\n".join(summary_lines(gloo))
