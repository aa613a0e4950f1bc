"""Notebook 02's topic (``notebooks/02_mirrored_strategy.ipynb``): MirroredStrategy runs in rounds, and
the notebook's self-checks."""
