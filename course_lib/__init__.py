"""Companion library of the course "Hands-on distributed deep learning with TensorFlow".

The notebooks in ``notebooks/`` and the scripts in ``source_code/`` import the helpers from
the submodules (``course_lib.data``, ``course_lib.devices``, ``course_lib.models``,
``course_lib.callbacks``, ``course_lib.scaling``, ``course_lib.launch``, ``course_lib.widgets``,
``course_lib.optimizers``). Importing the package itself does no work: it does not import
TensorFlow, so ``course_lib.devices.simulate_devices`` can still run before TensorFlow starts.

Introduced in notebooks/00_setup.ipynb.
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
