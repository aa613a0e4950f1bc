"""Companion library of the course "Hands-on distributed deep learning with TensorFlow".

Four layers, one folder each; a layer imports only from the layers above it in this list
(``tests/test_layers.py`` enforces it):

``training/``
    What a training script needs, and all that ``source_code/`` may import: ``data`` and
    ``fmnist_files`` (real Fashion-MNIST, verified), ``pipeline`` (shards and batches),
    ``hardware`` (what the machine has), ``capacity`` (what it can run: slots, the lessons' plans),
    ``placement`` and ``slot_files`` (which cores or GPU a worker runs on),
    ``devices``, ``models``, ``optimizers`` (LARS, LAMB), ``callbacks`` (Throughput, JSON
    events), ``flags``, ``epochs`` (epoch arithmetic), ``events`` (JSON lines), ``seeding``,
    ``checkpoints``, ``schedules`` and ``files`` (atomic writes).
``runner/``
    Starting training processes from a notebook: ``preflight`` (input checks), ``placing`` (what
    a launch holds), ``slots`` (machine-wide queue and grants), ``place_rank`` (the rank wrapper),
    ``processes`` (process groups and clean-up), ``runlog`` (rank prefixes and JSON lines into a
    RunResult), ``launch`` (``run_horovod``, ``run_python``) and ``multiworker``.
``lessons/``
    Helpers of the notebooks: ``concepts`` and ``experiments`` (01), ``scaling`` (tables and
    plots), ``ablation`` (04), ``exercises`` (self-checks), ``widgets`` (the control panel).
``environment/``
    The learner's machine: ``doctor`` (``python -m course_lib doctor``) and ``lab``
    (``make lab``).

Importing the package itself does no work: it does not import TensorFlow, so
``course_lib.training.devices.simulate_devices`` can still run before TensorFlow starts.

Introduced in notebooks/00_setup.ipynb.
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
