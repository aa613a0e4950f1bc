"""The training layer: what a training script needs (and all that ``source_code/`` may import).

Nothing here imports the runner, lesson or environment layers. Importing this package does no
work. ``keras2``, ``callbacks``, ``optimizers`` and ``accumulation`` import TensorFlow at the top; every other
submodule imports it only inside the functions that need it (docs/architecture.md; tests/test_tf_at_import.py
derives the list from the code).
"""
