"""Tests of course_lib.lessons.communication.bound: the reachable bound of a 2-rank all-reduce, Horovod's share
of it, where the remainder goes, and the verdict that says when a run beats the bound (issue 52, item 4)."""

from __future__ import annotations

import pytest

from course_lib.lessons.communication import bound

MS = 1e-3


def _events(controller="gloo", bare=(40.0, 41.0, 39.0), horovod=(70.0, 72.0, 68.0), faults=(0, 0, 0)):
    """One launch's lines: exchange 18 ms, add 4 ms -> a 40 ms bound in every round."""
    line = {"event": "bound", "bytes": 64 * 2 ** 20, "controller": controller,
            "transport": "tcp" if controller == "gloo" else "mpi", "workers": 2,
            "exchange_s": [18 * MS] * 3, "add_s": [4 * MS] * 3, "copy_s": [10 * MS] * 3,
            "copy_fresh_s": [16 * MS] * 3, "bare_s": [b * MS for b in bare]}
    calls = [{"event": "allreduce", "bytes": 4096, "dispatch": "eager", "round_medians_s": [5 * MS, 5 * MS, 5 * MS]},
             {"event": "allreduce", "bytes": 64 * 2 ** 20, "dispatch": "eager",
              "round_medians_s": [h * MS for h in horovod], "round_minflt": list(faults)}]
    return [line, *calls]


def test_the_bound_is_two_exchanges_and_the_add_and_shares_are_per_round():
    rounds = bound.bound_rounds(_events())
    assert rounds.bound() == pytest.approx([40 * MS] * 3)
    share = rounds.share(rounds.horovod)
    assert share.seconds == pytest.approx((40 / 70 + 40 / 72 + 40 / 68) / 3) and share.rounds == 3
    assert rounds.bound_beaten() is None                       # the bare ring runs at the bound: its interval holds 1
    assert rounds.horovod_below_path() is True
    lines = rounds.lines()
    assert len(lines) == 3 and all(line.startswith("measured: gloo: ") for line in lines)
    assert "without Horovod, all-reduce efficiency ≈1.00 ± 0.06 of the bound (95 %, 3 rounds): at the bound" in lines[1]
    assert "; Horovod, all-reduce efficiency ≈0.57 ± " in lines[1]


def test_a_run_above_its_bound_says_the_bound_failed():
    """Planted: the all-reduce without Horovod takes 30 ms against a 40 ms 'bound'."""
    beaten = bound.bound_rounds(_events(bare=(30.0, 31.0, 29.0)))
    assert beaten.bound_beaten() is True and "above the bound: the bound failed" in beaten.lines()[1]
    slow = bound.bound_rounds(_events(bare=(60.0, 61.0, 59.0)))
    assert slow.bound_beaten() is False and "): below the bound;" in slow.lines()[1]


def test_the_remainder_adds_up_round_by_round_and_names_the_residual():
    gloo = bound.bound_rounds(_events()).remainder()
    assert gloo.total.seconds == pytest.approx(30 * MS)                     # 70 - 40
    assert gloo.path.seconds == pytest.approx(0.0, abs=1e-12)
    assert gloo.copy.seconds == pytest.approx(10 * MS)                      # Gloo copies S; no fresh page
    assert gloo.first_touch.seconds == pytest.approx(0.0)
    assert gloo.alpha.seconds == pytest.approx(5 * MS)
    assert gloo.residual.seconds == pytest.approx(15 * MS)
    assert sum(f.seconds for f in gloo.parts().values()) == pytest.approx(gloo.total.seconds)
    # MPI: no copy; every page of the output fresh (16 384 faults of 64 MiB) costs the fresh copy's extra 6 ms
    mpi = bound.bound_rounds(_events("mpi", faults=(16384, 16384, 16384))).remainder()
    assert mpi.copy.seconds == 0.0 and mpi.first_touch.seconds == pytest.approx(6 * MS)
    half = bound.bound_rounds(_events("mpi", faults=(8192, 8192, 8192))).remainder()
    assert half.first_touch.seconds == pytest.approx(3 * MS)


def test_a_launch_without_the_bound_is_named():
    with pytest.raises(ValueError, match="--bound"):
        bound.bound_rounds(_events()[1:])
    short = _events()
    short[2] = {**short[2], "round_medians_s": [70 * MS]}
    with pytest.raises(ValueError, match="differ in count"):
        bound.bound_rounds(short)
