"""A local cluster on this machine for the tests and for rehearsals: a one-node Slurm and two ssh hosts.

Standard library only (no TensorFlow): :mod:`.slurm`, :mod:`.slurm_jobs`, :mod:`.hosts`, :mod:`.faults`,
:mod:`.drive`, ``discover_reachable.sh``, and ``python -m tools.localcluster up|down|status``
(cluster/README.md, "Try it on one machine"). Root only.
"""
