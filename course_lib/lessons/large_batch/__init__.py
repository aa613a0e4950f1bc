"""Notebook 04's topic (``notebooks/04_large_batch.ipynb``): trials, the ladder of changes, time to target,
recovery, and the notebook's self-checks."""
