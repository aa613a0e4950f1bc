"""Tests of course_lib.lessons.communication.comm_findings: every summary sentence of notebook 05 follows its
verdict."""

from __future__ import annotations

import dataclasses

import pytest

from course_lib.lessons.communication.comm_findings import Findings, summary_lines

BASE = Findings(latency_ratio=300.0, latency_far_above=True, largest_part="cycle wait", largest_share=0.57,
                largest_decided=True, cycle_majority=True, additive=True,
                bound_share={"gloo": (0.58, True), "mpi": (0.92, False)},
                per_byte={"copy": True, "add": True, "first_touch": True, "without_horovod": True},
                horovod_bandwidth_rises=True, skew_explains=True, mpi_faster_small=True,
                mpi_faster_large=True)

# field -> the other values it can take; every one must change the summary
FLIPS = {
    "latency_far_above": [False, None],
    "cycle_majority": [False, None],
    "largest_decided": [None],
    "additive": [False, None],
    "bound_share": [{"gloo": (0.58, False), "mpi": (0.92, False)}, {"gloo": (0.58, None), "mpi": (0.92, False)}],
    "per_byte": [{"copy": True, "add": None, "first_touch": True, "without_horovod": True},
                 {"copy": True, "add": True, "first_touch": False, "without_horovod": True}],
    "horovod_bandwidth_rises": [False, None],
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
    assert "The largest part of α is cycle wait" in text and "most of α is the cycle wait" in text
    assert "gloo: Horovod's 64 MiB all-reduce reaches ≈0.58 of the bound; the all-reduce without Horovod reaches more" in text
    assert "mpi: Horovod's 64 MiB all-reduce reaches ≈0.92 of the bound; as much as" in text
    assert "more per byte: copy yes, add yes, first touch yes, the all-reduce without Horovod yes;" in text
    assert "α is spread over 4x the bytes" in text and "cannot tell here" in text and "section 10s" in text
    undecided = "\n".join(summary_lines(dataclasses.replace(BASE, largest_decided=None)))
    assert "The largest part" not in undecided and "Which part of α is largest: cannot tell" in undecided
    low = "\n".join(summary_lines(dataclasses.replace(BASE, cycle_majority=False, largest_part="negotiation")))
    assert "most of α is the cycle wait" not in low and "less than half of α" in low   # the E-1 case
    assert "do NOT add up" in "\n".join(summary_lines(dataclasses.replace(BASE, additive=False)))
    assert "`horovodrun --mpi` is the faster controller" in text
    gloo = dataclasses.replace(BASE, mpi_faster_small=False, mpi_faster_large=False)
    assert "keep Gloo" in "\n".join(summary_lines(gloo))
