"""Notebook 06's topic (``notebooks/06_beyond_one_machine.ipynb``): an elastic run epoch by epoch, and the
notebook's self-checks."""
