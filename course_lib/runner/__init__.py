"""The runner layer: start training processes from a notebook, stream them, clean them up.

``launch`` is the entry point (``run_horovod``, ``run_python``); ``preflight`` checks every input
before anything starts, ``processes`` owns process groups and their clean-up, and ``runlog`` turns
output lines into a ``RunResult``. Imports only the training layer.
"""
