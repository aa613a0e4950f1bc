"""Instructor solution to notebook 04's coding exercise (``04.lr_schedule``): linear scaling + warm-up.

``tests/test_lr_schedule_check.py`` proves that ``course_lib.lessons.large_batch.checks.check_lr_schedule``
accepts it and rejects typical wrong versions.
"""


def learning_rate(update, *, base_lr, base_batch, batch, warmup_updates):
    """Rate of optimizer update ``update`` (0 = first) after the batch grew from base_batch to batch."""
    peak = base_lr * batch / base_batch            # linear scaling rule (Goyal et al. 2017)
    if warmup_updates == 0:
        return peak
    done = min(update + 1, warmup_updates) / warmup_updates   # update 0 already takes one step
    return base_lr + (peak - base_lr) * done       # ramp from the small-batch rate to the peak
