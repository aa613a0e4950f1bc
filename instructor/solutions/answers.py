"""Instructor solutions to the notebooks' exercises, with the working.

Keys match ``course_lib.lessons.common.answers.EXERCISES``; ``tests/test_exercises.py`` checks every one of them
against the self-check cells' checker.
"""

# Worked by hand, not with the checkers' functions: a slip on either side makes tests/test_exercises.py fail.
SOLUTIONS = {
    # 00_setup
    "00.global_batch": 256,      # 64 images per replica x 4 replicas = 256 images per step
    # 02_mirrored_strategy
    "02.replicas_steps": 469,    # global batch 64 x 2 = 128; 60 000 / 128 = 468.75 -> 469 steps
    # 03_horovod
    "03.epochs": 469,            # 60 000 / 4 workers = 15 000 each; 15 000 / 32 = 468.75 -> 469 steps
    # 07_frameworks
    "07.adam_state": 9.599056,   # 2 moments x 4 bytes x 1 199 882 parameters, on EVERY rank (DDP copies it all)
}

# Typical wrong answers a learner gives, per exercise (the self-check must reject them).
WRONG = {
    "00.global_batch": [64, 16],
    "02.replicas_steps": [938, 468],
    "03.epochs": [1_875, 117],
    "07.adam_state": [2.399764, 4.799528],   # divided by the 4 ranks (that is ZeRO); one moment only
}

# Coding exercises: the solution is a file; the self-check reads the learner's run, not a stored value.
CODING = {
    # 01_data_parallelism: finish the ring all-reduce (the all-gather half), ring_allreduce below.
    "01.ring_allreduce": "instructor/solutions/answers.py::ring_allreduce",
    # 03_horovod: turn source_code/keras_fmnist.py into a Horovod script and run it with 2 workers.
    # The course's own minimal script IS the solution (diff it against keras_fmnist.py: the five changes).
    "03.horovod_script": "source_code/horovod_fmnist_minimal.py",
    # 02_mirrored_strategy: replica_step below.
    "02.replica_step": "instructor/solutions/answers.py::replica_step",
    # 04_large_batch: my_learning_rate (linear scaling + warm-up), checked by
    # course_lib.lessons.large_batch.checks.check_lr_schedule.
    "04.lr_schedule": "instructor/solutions/lr_schedule.py::learning_rate",
}


def replica_step(model, optimizer, images, labels):
    """02's coding exercise: one replica's share of a training step (run by strategy.run)."""
    from course_lib.training.keras2 import keras
    import tensorflow as tf

    per_example = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=keras.losses.Reduction.NONE)
    context = tf.distribute.get_replica_context()
    step_images = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.shape(labels)[0])  # all replicas
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(per_example(labels, model(images, training=True)),
                                          global_batch_size=step_images)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


def ring_allreduce(arrays):
    """01's coding exercise: the notebook's skeleton (reduce-scatter given) with its all-gather written."""
    import numpy as np

    n = len(arrays)
    chunks = [np.array_split(np.asarray(a, dtype=float).copy(), n) for a in arrays]
    for s in range(n - 1):                      # reduce-scatter (given in the notebook)
        sends = [(w, (w - s) % n, chunks[w][(w - s) % n].copy()) for w in range(n)]
        for w, c, payload in sends:
            chunks[(w + 1) % n][c] += payload
    for s in range(n - 1):                      # all-gather: pass on the finished chunk, store it as it is
        sends = [(w, (w + 1 - s) % n, chunks[w][(w + 1 - s) % n].copy()) for w in range(n)]
        for w, c, payload in sends:
            chunks[(w + 1) % n][c] = payload
    return [np.concatenate(parts) for parts in chunks]
