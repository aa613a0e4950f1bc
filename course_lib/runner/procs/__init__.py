"""The process tier of the runner: start an argument list, stream it, leave nothing behind.

It knows argv, an environment, a working directory, a deadline, a stop event, grace periods and process
groups, and nothing of launchers, slots or options (tests/test_layers.py keeps it so):

- ``processes``: :class:`~course_lib.runner.procs.processes.ProcessSpec` and ``stream_command``, which runs
  one argument list in its own session under the watchdog and hands every line to a callback;
- ``watchdog``: the middleman that ends a run when its caller dies, and ``end_tree``, the one way a process
  tree is ended (it imports only the standard library and runs by path);
- ``supervise``: several workers run as one process, their lines tagged ``[i]<stdout>:``.

The launchers above it (:mod:`course_lib.runner.run`, :mod:`course_lib.runner.launchers`) decide what to start.

Introduced in notebooks/03_horovod.ipynb.
"""
