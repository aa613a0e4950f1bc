"""The runner layer: start training processes from a notebook, stream them, clean them up.

Two tiers and one engine. The public launchers (``launch``: ``run_horovod``, ``run_python``;
``multiworker``: ``run_elastic``, ``run_workers``, ``run_multiworker``, ``run_mpirun``; ``torchrun``:
``run_torchrun``) share one signature, ``run_<launcher>(script, script_args=(), *, workers=WorkerPlan | int,
<the shared options>, <at most one option of its own>)``, and are a few lines each over ``run``, the one
engine (check, place, hold slots, stream, parse, return a ``RunResult``). ``launchers`` describes each
launcher once (its command, its rank-prefix line format, its name); ``preflight`` checks every input before
anything starts; ``slots`` decides what a launch holds on this machine and queues for the machine's cores or
GPUs (the lock files are ``course_lib.training.machine.slot_files``); ``place_rank`` is the rank wrapper
that puts a rank on its granted cores or GPU; ``runlog`` parses every output line into a ``RunResult``;
``horovodrun`` is Horovod's own launcher with its build check answered from a kept file (started as
``python -m course_lib.runner.horovodrun``; ``gloo_rendezvous`` fixes its rendezvous server); ``faults`` holds
the fault drills of notebook 06. Under them, ``procs`` is the process tier, which knows argv, env, cwd,
deadline, stop and grace and nothing of launchers, slots or options: ``procs.processes`` (stream one command
in its own session), ``procs.watchdog`` (every run under a middleman that ends it when its caller dies;
``end_tree`` is the one way a process tree is ended) and ``procs.supervise`` (several workers as one process).
Imports only the training layer.
"""
