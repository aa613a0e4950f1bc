"""Companion library of the course "Hands-on distributed deep learning with TensorFlow".

Four layers, one folder each. A layer imports only from itself and the layers it names here: a graph,
not a line (``lessons`` and ``environment`` are siblings that never import each other).
``tests/test_package_map.py`` checks this text against the code: every module listed under its layer,
and each layer's imports as ``tests/test_layers.MAY_IMPORT`` enforces them.

``training/`` (imports no other layer)
    What a training script needs, and all that ``source_code/`` may import: ``data``, ``fmnist_files``
    and ``tfds_cache`` (real Fashion-MNIST, verified), ``epochs`` (the epoch plan and its batch
    vocabulary), ``pipeline`` (shards and batches), ``machine/`` (where a worker runs on this machine:
    ``machine.hardware``, what it has; ``machine.capacity``, what it can run: slots, the lessons' plans;
    ``machine.placement`` and ``machine.slot_files``, which cores or GPU a worker runs on), ``devices``
    (TensorFlow's devices; the notebooks' one import for machine facts), ``keras2`` (the one source of
    Keras: tf_keras, Keras 2), ``models``,
    ``optimizers`` (LARS, LAMB), ``accumulation`` (gradient accumulation), ``callbacks`` and
    ``throughput`` (images/s), ``cpuclock`` (CPU time of an epoch), ``consumption`` (which examples a
    run trained on), ``flags`` (the scripts' shared flags), ``report`` (a script's config and result
    lines), ``events`` (JSON lines), ``stats`` (intervals, the one verdict rule, efficiency),
    ``seeding``, ``checkpoints``, ``schedules``, ``files`` (atomic writes), ``autograph`` (Horovod's
    functions left as they are at a rank's first step: start-up time), ``drills`` (what notebook 06's
    fault drills read from its multi-worker scripts) and ``idx_arrays`` (the Fashion-MNIST files read with NumPy
    alone: notebook 07's PyTorch and JAX scripts).
``runner/`` (imports training)
    Starting training processes from a notebook, in two tiers and one engine: the public launchers
    ``launch`` (``run_horovod``, ``run_python``), ``multiworker`` (elastic Horovod, several python workers,
    mpirun) and ``torchrun`` (PyTorch's launcher, notebook 07), one signature for all; ``run`` (the one
    engine: check, place, hold slots, stream, parse), ``launchers`` (one description per launcher),
    ``preflight`` (input checks), ``slots`` (what a launch holds: its placement, the machine-wide queue and
    grants), ``runlog`` (rank prefixes and JSON lines into a RunResult), ``place_rank`` (the rank wrapper),
    ``horovodrun`` (horovodrun without its per-launch build check), ``gloo_rendezvous`` (Horovod's Gloo
    rendezvous server fixed for restarts), ``faults`` (notebook 06's drills); under them the process tier
    ``procs.processes``, ``procs.watchdog`` and ``procs.supervise`` (argv, deadline, stop, grace, process
    groups and clean-up; nothing of launchers, slots or options).
``lessons/`` (imports training, runner)
    Helpers of the notebooks, one package per notebook topic with its self-checks (``checks``) beside its
    helpers, and ``common/`` for what two or more topics use; no topic imports another, ``common`` imports no
    topic. ``common``: ``common.measured`` (a measured value shown masked, with its verdict),
    ``common.display`` (what a cell shows), ``common.paired_runs`` (runs in ABBA rounds, paired; the one owner
    of the pairing), ``common.scaling`` (tables and plots), ``common.coverage`` (every image once),
    ``common.script_diff`` (the lines between two scripts), ``common.ring`` (the ring's ``2 (N - 1) / N``),
    ``common.checks`` (the one self-check pattern) and ``common.answers`` (the keyed answers).
    01: ``data_parallelism.concepts``, ``data_parallelism.experiments``, ``data_parallelism.checks``;
    02: ``mirrored_strategy.mirrored_rounds``, ``mirrored_strategy.checks``; 03: ``horovod.widgets`` (the
    control panel), ``horovod.checks``; 04: ``large_batch.ladder``, ``large_batch.ladder_verdicts``,
    ``large_batch.ladder_view``, ``large_batch.time_to_target``, ``large_batch.recovery``,
    ``large_batch.trials``, ``large_batch.trial_runner``, ``large_batch.checks``; 05 (what communication
    costs): ``communication.allreduce_model``, ``communication.transport``, ``communication.alpha_parts``,
    ``communication.comm_findings``, ``communication.knobs``, ``communication.timeline``,
    ``communication.checks``; 06: ``beyond_one_machine.elastic_run`` (an elastic run epoch by epoch),
    ``beyond_one_machine.checks``; 07: ``frameworks.frameworks`` (notebook 07's rows and verdicts).
``environment/`` (imports training, runner)
    The learner's machine: ``doctor`` (``python -m course_lib doctor``), ``tensorflow_build`` (which TensorFlow
    build the machine takes and has), ``frameworks`` (notebook 07's second venv), ``machine`` (what a
    measurement ran on: the ``machine:`` stamp), ``lab`` (``make lab``) and ``course_contents`` (what the course
    folder holds).

Importing the package itself does no work: it does not import TensorFlow, so
``course_lib.training.devices.simulate_devices`` can still run before TensorFlow starts.

Introduced in notebooks/00_setup.ipynb.
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
