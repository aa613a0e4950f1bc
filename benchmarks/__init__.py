"""The course's own benchmarks: ``make bench`` runs ``benchmarks/run.py`` (see README.md)."""
