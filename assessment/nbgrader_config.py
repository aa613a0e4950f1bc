"""nbgrader's configuration for the course's assessment (classroom/README.md, "Assessment").

The course root of nbgrader is this folder: ``source/ddp/assessment.ipynb`` is the source, nbgrader writes
``release/``, ``submitted/``, ``autograded/`` and ``feedback/`` beside it, and the gradebook ``gradebook.db``
(mode 0600: the room's set-up makes it so). The exchange is the room's (``COURSE_ROOM_EXCHANGE``).
"""

import os

c = get_config()  # noqa: F821  (nbgrader's config loader defines it)

c.CourseDirectory.course_id = "dl-course"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")
c.Exchange.root = os.environ.get("COURSE_ROOM_EXCHANGE", "/srv/nbgrader/exchange")
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# The code task's launch and the measure task's rounds run real multi-process trainings.
c.ExecutePreprocessor.timeout = 1800
c.Execute.timeout = 1800
