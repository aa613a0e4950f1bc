"""The training layer: what a training script needs (and all that ``source_code/`` may import).

Nothing here imports the runner, lesson or environment layers. Importing this package does no
work; each submodule imports TensorFlow only inside the functions that need it.
"""
