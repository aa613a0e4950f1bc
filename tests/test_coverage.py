"""Tests of course_lib.training.consumption and course_lib.lessons.common.coverage.

"Every training image exactly once" is checked from the ids each rank's input pipeline actually
handed to the model: synthetic events for the verdict's arithmetic (overlap, gap, repeat, missing
rank, wrong padding), and real pipelines (including the "every rank reads shard 0" mutant).
"""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.lessons.common.coverage import check_coverage
from course_lib.training.consumption import ConsumedIds, ids_hash, mix64, summarize_ids


def _consumed(rank: int, ids, padding=(), epoch: int = 1) -> dict:
    padding = np.asarray(padding, dtype=np.int64)
    return {"event": "consumed", "rank": rank, "epoch": epoch, **summarize_ids(ids),
            "padding": int(padding.size), "padding_hash": ids_hash(padding)}


def _config(train_size: int, workers: int, strategy: str = "horovod") -> dict:
    return {"event": "config", "train_size": train_size, "workers": workers, "strategy": strategy}


# ----------------------------------------------------------------- the hash
def test_hash_is_order_free_and_additive_over_disjoint_sets():
    ids = np.arange(1000)
    rng = np.random.default_rng(0)
    assert ids_hash(rng.permutation(ids)) == ids_hash(ids)
    assert (ids_hash(ids[:300]) + ids_hash(ids[300:])) % 2**64 == ids_hash(ids)
    assert ids_hash(np.r_[ids[:-1], 0]) != ids_hash(ids)  # one id swapped for a repeat
    assert len(set(mix64(ids).tolist())) == 1000  # no collisions among small ids


def test_summary_counts_repeats():
    assert summarize_ids([3, 1, 3]) == {"count": 3, "unique": 2, "ids_sum": 4,
                                        "ids_hash": ids_hash([1, 3])}


# ----------------------------------------------------------------- synthetic events
def test_disjoint_shards_that_cover_the_set_pass():
    events = [_config(10, 3), _consumed(0, [0, 3, 6, 9]), _consumed(1, [1, 4, 7]),
              _consumed(2, [2, 5, 8], padding=[0, 1])]
    cov = check_coverage(events)
    assert cov.ok, cov.problems
    assert str(cov) == ("every training image exactly once: True (10 ids, 3 ranks, 1 epoch, "
                        "0 repeats beyond padding)")


def test_overlap_is_caught():
    cov = check_coverage([_config(6, 2), _consumed(0, [0, 1, 2]), _consumed(1, [0, 1, 2])])
    assert not cov.ok
    assert "shards overlap or leave a gap" in str(cov) and str(cov).startswith(
        "every training image exactly once: False")


def test_gap_is_caught():
    cov = check_coverage([_config(6, 2), _consumed(0, [0, 2, 4]), _consumed(1, [1, 3])])
    assert not cov.ok and "5 distinct ids over the ranks for 6 examples" in str(cov)


def test_repeat_within_a_rank_is_caught():
    cov = check_coverage([_config(6, 2), _consumed(0, [0, 2, 4, 4]), _consumed(1, [1, 3, 5])])
    assert not cov.ok and "1 ids consumed twice by the same rank" in str(cov)
    assert cov.repeats == 1


def test_swapped_id_with_the_same_counts_is_caught_by_the_hash():
    # Same count, same unique, same plain sum (0+5 = 1+4), other ids: only the hash tells.
    cov = check_coverage([_config(6, 2), _consumed(0, [1, 2, 4]), _consumed(1, [1, 3, 4])],
                         train_size=6)
    assert not cov.ok


def test_missing_rank_wrong_padding_and_no_events():
    assert "ranks [0] reported, expected [0, 1]" in str(
        check_coverage([_config(4, 2), _consumed(0, [0, 1, 2, 3])]))
    cov = check_coverage([_config(5, 2), _consumed(0, [0, 2, 4]), _consumed(1, [1, 3])])
    assert not cov.ok and "0 padded copies, documented 1" in str(cov)
    assert "no consumed events" in str(check_coverage([_config(5, 2)]))
    with pytest.raises(ValueError, match="train_size"):
        check_coverage([_consumed(0, [0])])


def test_every_epoch_is_checked_and_mirrored_has_one_reader():
    good = [_consumed(0, [0, 1, 2, 3], epoch=1), _consumed(0, [3, 2, 1, 0], epoch=2)]
    cov = check_coverage([_config(4, 2, "mirrored"), *good])
    assert cov.ok and cov.readers == 1 and cov.epochs == [1, 2]
    bad = check_coverage([_config(4, 2, "mirrored"), good[0], _consumed(0, [0, 1, 2, 2], epoch=2)])
    assert not bad.ok and all(p.startswith("epoch 2:") for p in bad.problems)


def test_run_result_events_are_accepted():
    from course_lib.runner.runlog import RunResult

    run = RunResult(command=["x"])
    for rank, event in [(0, _config(4, 2)), (0, _consumed(0, [0, 2])), (1, _consumed(1, [1, 3]))]:
        run.add_line("", rank, "stdout", "", event)
    assert check_coverage(run).ok


# ----------------------------------------------------------------- real pipelines
def _pipeline_events(n: int, workers: int, *, shard_of=lambda rank: rank) -> list[dict]:
    from course_lib.training import pipeline

    images, labels = np.zeros((n, 28, 28), np.uint8), np.arange(n) % 10
    events = [_config(n, workers)]
    for rank in range(workers):
        recorder = ConsumedIds()
        ds = pipeline.make_epochs_dataset(images, labels, batch_size=16, seed=3,
                                          num_workers=workers, worker_index=shard_of(rank),
                                          first_epoch=0, last_epoch=2, recorder=recorder)
        for _ in ds:
            pass
        events += [{"event": "consumed", **recorder.event(e, rank)} for e in recorder.epochs()]
    return events


@pytest.mark.parametrize(("n", "workers"), [(101, 2), (100, 3), (64, 1)])
def test_real_pipeline_shards_pass(n: int, workers: int):
    cov = check_coverage(_pipeline_events(n, workers))
    assert cov.ok, cov.problems
    assert cov.epochs == [1, 2]


def test_mutant_every_rank_reads_shard_0_fails():
    cov = check_coverage(_pipeline_events(100, 2, shard_of=lambda rank: 0))
    assert not cov.ok
    assert "shards overlap or leave a gap" in str(cov)


def test_recorder_sees_only_pulled_batches():
    from course_lib.training import pipeline

    recorder = ConsumedIds()
    ds = pipeline.make_epochs_dataset(np.zeros((64, 28, 28), np.uint8), np.zeros(64), batch_size=8,
                                      seed=0, num_workers=1, worker_index=0, first_epoch=0,
                                      last_epoch=1, recorder=recorder)
    for _ in ds.take(3):  # prefetching reads ahead; the recorder must not count what was not pulled
        pass
    assert len(recorder.ids(0)) == 24
