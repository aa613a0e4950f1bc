"""nbgrader's settings for a learner's server in the room: which course and exchange the Assignments tab uses.

The hub points every learner's server here (``JUPYTER_CONFIG_PATH``, classroom/jupyterhub_config.py); the
instructor's side is assessment/nbgrader_config.py.
"""

import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "dl-course"
c.Exchange.root = os.environ.get("COURSE_ROOM_EXCHANGE", "/srv/nbgrader/exchange")
