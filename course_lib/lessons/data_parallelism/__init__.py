"""Notebook 01's topic (``notebooks/01_data_parallelism.ipynb``): the ring simulated, the batch-size sweep,
and the notebook's self-checks."""
