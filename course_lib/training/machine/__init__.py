"""Where a worker runs on this machine: what it has, what it can run, which cores or GPU a worker takes.

``hardware`` (what the machine has: cores, GPUs), ``capacity`` (what it can run at once: slots, the
lessons' plans), ``placement`` (which cores or GPU a worker runs on) and ``slot_files`` (the machine-wide
lock files both the launcher and the scripts take). Part of the training layer, so the scripts may use it;
nothing here imports TensorFlow, and importing this package does no work. Notebooks ask
:mod:`course_lib.training.devices` for the few machine facts they show; every other caller imports a name
from its home here.

Introduced in notebooks/00_setup.ipynb.
"""
