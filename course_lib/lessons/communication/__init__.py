"""Notebook 05's topic (``notebooks/05_communication.ipynb``): the alpha-beta model, transport, the reachable
bound, alpha's parts, timelines, knobs, findings, and the notebook's self-checks."""
