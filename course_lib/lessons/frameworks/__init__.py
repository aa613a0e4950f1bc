"""Notebook 07's topic (``notebooks/07_frameworks.ipynb``): one job four ways, its rows and verdicts."""
