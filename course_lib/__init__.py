"""Companion library of the course "Hands-on distributed deep learning with TensorFlow".

Four layers, one folder each: ``training/`` (what a training script needs), ``runner/`` (starting training
processes from a notebook), ``lessons/`` (what the notebooks call, one package per notebook topic) and
``environment/`` (the learner's machine). Which layer may import which, and every module with its role, is in
``docs/architecture.md``: its module map is generated from the tree by ``tools/maintainers/maps.py``, so this
docstring lists no module.

Importing the package itself does no work: it does not import TensorFlow, so
``course_lib.training.devices.simulate_devices`` can still run before TensorFlow starts.

Introduced in notebooks/00_setup.ipynb.
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
