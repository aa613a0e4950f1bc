"""The lesson layer: helpers the notebooks call (simulations, tables, plots, self-checks, widgets).

A notebook's topic is a package, named by the notebook's file without its number
(``notebooks/04_large_batch.ipynb`` -> ``large_batch/``), holding its helpers and its self-checks
(``checks.py``) side by side; a helper two notebooks use is in ``common/``. No topic imports another
topic, and ``common/`` imports no topic (``tests/test_layers.py``).

May import the training and runner layers; nothing below it imports this layer.
"""
