"""The environment layer: the learner's machine — the doctor and the JupyterLab launcher."""
