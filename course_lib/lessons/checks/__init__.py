"""The notebooks' self-checks: one core, the keyed answers, and one module per notebook.

* :mod:`~course_lib.lessons.checks.core`: what every self-check prints and returns, and how it runs the
  learner's code (``right``, ``wrong``, ``waiting``, ``word_answer``, ``learner_call``, ``VERDICT_LINE``);
* :mod:`~course_lib.lessons.checks.answers`: the numeric and word answers of every notebook, by key
  (``check("07.adam_state", answer)``);
* one module per notebook, named by the notebook's file name without its number
  (``notebooks/04_large_batch.ipynb`` -> ``checks/large_batch.py``), holding that notebook's ``check_...``
  functions, the checks that run the learner's code or read the learner's run.

A notebook imports each checker from its home module, never through another one. The rule is written for
maintainers in docs/extending.md ("Adding a notebook", step 3) and kept by ``tests/test_exercises.py``.
"""
