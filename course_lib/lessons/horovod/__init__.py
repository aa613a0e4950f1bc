"""Notebook 03's topic (``notebooks/03_horovod.ipynb``): the control panel, and the notebook's self-checks."""
