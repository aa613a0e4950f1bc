"""The runner layer: start training processes from a notebook, stream them, clean them up.

``launch`` is the entry point (``run_horovod``, ``run_python``), which starts ``horovodrun`` as
``python -m course_lib.runner.horovodrun`` (Horovod's own launcher, its build check answered from a kept
file); ``options`` declares the keywords
every launcher shares and ``Launch``, the launch as one value (command, launcher, what it holds, options)
that every launcher hands on; ``preflight`` checks every input before anything starts; ``slots`` decides
what a launch holds on this machine and queues for the machine's cores or GPUs (the lock files are
``course_lib.training.machine.slot_files``); ``execute`` is the glue every launcher shares (hold slots, hand
each rank its share, stream, collect, raise); ``place_rank`` is the rank wrapper that puts a rank on
its granted cores or GPU; ``processes`` owns process groups and their clean-up (every run under a
``watchdog`` that ends it when its caller dies and adopts its orphans; ``watchdog.end_tree`` is the one
way a process tree is ended); and ``runlog`` parses every output line into a ``RunResult``.
``multiworker`` runs elastic Horovod, several python workers (``supervise``) and plain mpirun;
``faults`` holds the fault drills of notebook 06. Imports only the training layer.
"""
