"""What two or more notebooks use: measured values and verdicts, figures, paired runs, scaling tables,
coverage, script diffs, the ring's formula, and the self-check core with the keyed answers.

Imports no topic package of the lessons layer.
"""
