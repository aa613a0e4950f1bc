"""Instructor solutions to the notebooks' exercises, with the working.

Keys match ``course_lib.lessons.exercises.EXERCISES``; ``tests/test_exercises.py`` checks every one of them
against the self-check cells' checker.
"""

import math

SOLUTIONS = {
    # 00_setup
    "00.global_batch": 64 * 4,
    "00.steps": math.ceil(60_000 / 256),
    # 01_data_parallelism
    "01.ring_bytes": 2 * (8 - 1) / 8 * 4.0,
    "01.efficiency": 3_000 / (4 * 1_000),
    "01.trap": 58 * 1_024 / 10,
    # 02_mirrored_strategy
    "02.loss_scale": 32 * 2,
    "02.replicas_steps": math.ceil(60_000 / (64 * 2)),
    # 03_horovod
    "03.epochs": math.ceil(60_000 / (32 * 4)),
    "03.scaled_lr": 0.001 * 8,
    # 04_large_batch
    "04.steps_ratio": 8,
}

# Typical wrong answers a learner gives, per exercise (the self-check must reject them).
WRONG = {
    "00.global_batch": [64, 16],
    "00.steps": [234, 60_000 // 256 * 256],
    "01.ring_bytes": [4.0, 8.0, 32.0],
    "01.efficiency": [3.0, 0.25],
    "01.trap": [6_000.0],
    "02.loss_scale": [32, 2],
    "02.replicas_steps": [938, 468],
    "03.epochs": [1_875, 117],
    "03.scaled_lr": [0.001, 0.000125],
    "04.steps_ratio": [1, 64],
}

# Coding exercises: the solution is a file; the self-check reads the learner's run, not a stored value.
CODING = {
    # 03_horovod: turn source_code/keras_fmnist.py into a Horovod script and run it with 2 workers.
    # The course's own minimal script IS the solution (diff it against keras_fmnist.py: the five changes).
    "03.horovod_script": "source_code/horovod_fmnist_minimal.py",
    # 02_mirrored_strategy: replica_step below.
    "02.replica_step": "instructor/solutions/answers.py::replica_step",
}


def replica_step(model, optimizer, images, labels):
    """02's coding exercise: one replica's share of a training step (run by strategy.run)."""
    import tensorflow as tf

    per_example = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
    context = tf.distribute.get_replica_context()
    step_images = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.shape(labels)[0])  # all replicas
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(per_example(labels, model(images, training=True)),
                                          global_batch_size=step_images)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss
