"""The runner layer: start training processes from a notebook, stream them, clean them up.

``launch`` is the entry point (``run_horovod``, ``run_python``); ``preflight`` checks every input
before anything starts, ``execute`` is the glue every launcher shares (hold slots, stream, collect,
raise), ``processes`` owns process groups and their clean-up (every run under a ``watchdog`` that
ends it when its caller dies), ``slots`` shares the machine's cores or GPUs between concurrent
launches (``slot_files`` reads the lock files), and ``runlog`` turns output lines into a
``RunResult``.
``multiworker`` runs elastic Horovod, several python workers (``supervise``) and plain mpirun;
``faults`` holds the fault drills of notebook 06. Imports only the training layer.
"""
