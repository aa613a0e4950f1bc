"""Companion library of the course "Hands-on distributed deep learning with TensorFlow".

The notebooks in ``notebooks/`` and the scripts in ``source_code/`` import the helpers from
the submodules, one concern each: ``data`` (real Fashion-MNIST) and ``pipeline`` (shards and
batches), ``devices``, ``models``, ``callbacks`` (Throughput), ``scaling``, ``launch`` (with
``preflight``, ``processes`` and ``runlog``), ``widgets``, ``optimizers`` (LARS, LAMB),
``training`` (shared pieces of the scripts), ``concepts`` and ``experiments`` (notebook 01),
``ablation`` (notebook 04), ``exercises``, ``doctor``, ``lab`` and ``files``. Importing the
package itself does no work: it does not import TensorFlow, so
``course_lib.devices.simulate_devices`` can still run before TensorFlow starts.

Introduced in notebooks/00_setup.ipynb.
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
