"""The graded assessment's grader (issue 55): what assessment/source/ddp/assessment.ipynb's hidden tests call.

One concern per module: :mod:`~course_lib.assessment.spec` (the code task's run, thresholds and points),
:mod:`~course_lib.assessment.code` (the code task's checks on a launched run), :mod:`~course_lib.assessment.measure`
(the measure task: run records saved by the learner, recomputed by the grader), :mod:`~course_lib.assessment.concepts`
(numeric answers with tolerances), :mod:`~course_lib.assessment.selfgrade` (``make assess``: the same tests, without a
hub) and :mod:`~course_lib.assessment.sandbox` (a submission's kernel, contained). Importing it starts no TensorFlow.

Introduced in assessment/source/ddp/assessment.ipynb.
"""
