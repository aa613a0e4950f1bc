"""JupyterHub for a room of learners on one machine (``make room``; see classroom/README.md).

Each learner is a real Unix user with their own single-user JupyterLab server, kernels and workspace
(``~/course``, a copy of the learner edition ``build/student`` made at their first start). The hub runs as
root (it must, to start servers as other users); learners log in with their user name and the room's
shared password. Everything is set by environment variables, so the same file serves ``make room`` and
tests/test_room.py:

==========================  ========================================================================
``COURSE_ROOM_USERS``       the learners' user names, comma-separated (required), e.g. ``ana,ben``
``COURSE_ROOM_PASSWORD``    the room's shared password, 8+ characters (required)
``COURSE_ROOM_ADMINS``      instructors' user names (comma-separated; optional)
``COURSE_ROOM_PORT``        the port learners open (default 8000), on ``COURSE_ROOM_IP`` (default all)
``COURSE_ROOM_HUB_PORT``    the hub's internal port (default 8081), ``COURSE_ROOM_API_PORT`` the proxy's
                            API port (default 8001); both on 127.0.0.1
``COURSE_ROOM_STATE``       the hub's database, cookie secret and pid file (default ``build/room``)
``COURSE_STUDENT_DIR``      the learner edition copied into each workspace (default ``build/student``)
``COURSE_ROOM_TFDS_DIR``    a prepared, world-readable tfds folder the kernels read Fashion-MNIST from
                            (default ``build/room-data/tensorflow_datasets``, which ``make room`` prepares)
==========================  ========================================================================

Users missing on the machine are created (``useradd``) when the hub starts. Every learner's Horovod run
takes machine-wide worker slots (``course_lib.runner.slots``, shared folder ``$COURSE_SLOTS_DIR``, default
``/tmp/course-slots``): with more learners than cores, runs queue and say so; nothing oversubscribes.
"""

# ruff: noqa: F821  (``c`` is JupyterHub's config object, injected when it loads this file)

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from jupyterhub.auth import LocalAuthenticator
from jupyterhub.authenticators.shared import SharedPasswordAuthenticator

from course_lib.environment.lab import lab_command

COURSE = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("COURSE_VENV", COURSE / ".venv"))
STATE = Path(os.environ.get("COURSE_ROOM_STATE", COURSE / "build" / "room"))
STUDENT = Path(os.environ.get("COURSE_STUDENT_DIR", COURSE / "build" / "student"))
PROXY = COURSE / "build" / "classroom-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
TFDS = Path(os.environ.get("COURSE_ROOM_TFDS_DIR", COURSE / "build" / "room-data" / "tensorflow_datasets"))
WORKSPACE = "course"  # under each learner's home


def _names(variable: str) -> set[str]:
    return {name.strip().lower() for name in os.environ.get(variable, "").split(",") if name.strip()}


class RoomError(RuntimeError):
    """The room cannot start as configured; the message says what to set."""


LEARNERS, ADMINS = _names("COURSE_ROOM_USERS"), _names("COURSE_ROOM_ADMINS")
PASSWORD = os.environ.get("COURSE_ROOM_PASSWORD", "")
if not LEARNERS:
    raise RoomError("set COURSE_ROOM_USERS to the learners' user names, e.g. COURSE_ROOM_USERS=ana,ben make room")
if len(PASSWORD) < 8:
    raise RoomError("set COURSE_ROOM_PASSWORD to the room's shared password (8 characters or more)")
if not (STUDENT / "notebooks").is_dir():
    raise RoomError(f"no learner edition in {STUDENT}: run `make student` first (or set COURSE_STUDENT_DIR)")
if not PROXY.exists():
    raise RoomError(f"configurable-http-proxy is missing ({PROXY}): run `make setup` (it runs npm ci in "
                    "build/classroom-proxy from classroom/package-lock.json)")
if os.geteuid() != 0:
    raise RoomError("the hub must run as root to start each learner's server as that learner: sudo make room")


def unreachable(path: Path) -> Path | None:
    """The first folder on the way to ``path`` (symlinks resolved) that other users cannot traverse, or None."""
    target = path.resolve()
    for folder in reversed(target.parents):
        if not os.stat(folder).st_mode & 0o001:
            return folder
    return None


# Learners' servers and kernels run the venv's Python as the learner: every folder on its way must be open.
for _needed in (VENV / "bin" / "python", VENV / "bin" / "jupyterhub-singleuser", COURSE / "course_lib"):
    _closed = unreachable(_needed)
    if _closed is not None:
        raise RoomError(
            f"learners cannot run {_needed} (it resolves to {_needed.resolve()}): {_closed} is closed to other "
            f"users (mode {oct(os.stat(_closed).st_mode & 0o777)}). Build the course's venv from a Python that "
            "every user can run (rm -rf .venv && PYTHON=/usr/bin/python3.X make setup, a Python in pyproject.toml's "
            "requires-python; a 3.11 must be 3.11.5 or "
            "newer, the lock's soupsieve needs it, so Debian 12's 3.11.2 will not do), or open that folder "
            f"for traversal only (chmod o+x {_closed})")


class ClassroomAuthenticator(LocalAuthenticator, SharedPasswordAuthenticator):
    """The room's shared password, for real Unix users that the hub creates when they are missing."""


def prepare_workspace(spawner) -> None:
    """Before a learner's server starts: their home is theirs alone (0700), and ``~/course`` holds the
    learner edition (copied once; a learner's own changes are kept across restarts)."""
    user = pwd.getpwnam(spawner.user.name)
    home = Path(user.pw_dir)
    os.chmod(home, 0o700)
    workspace = home / WORKSPACE
    if not workspace.exists():
        shutil.copytree(STUDENT, workspace, ignore=shutil.ignore_patterns(".venv", "build"))
        subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(workspace)], check=True)


def _pythonpath(spawner) -> str:
    return str(Path(pwd.getpwnam(spawner.user.name).pw_dir) / WORKSPACE)


# The lab's own settings (contents manager refusing instructor/, hidden files, no news, python3 kernel), as
# `make lab` starts it; the hub sets the address, port and folder itself.
_OWN = ("--notebook-dir=", "--ServerApp.ip=", "--ServerApp.port=", "--ServerApp.port_retries=",
        "--ServerApp.allow_root=", "--LabApp.default_url=")
LAB_SETTINGS = [arg for arg in lab_command(notebook_dir=STUDENT)[3:] if not arg.startswith(_OWN)]

c = get_config()  # noqa: F821
c.JupyterHub.bind_url = f"http://{os.environ.get('COURSE_ROOM_IP', '')}:{os.environ.get('COURSE_ROOM_PORT', '8000')}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{os.environ.get('COURSE_ROOM_HUB_PORT', '8081')}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('COURSE_ROOM_API_PORT', '8001')}"
c.ConfigurableHTTPProxy.command = [str(PROXY)]
c.ConfigurableHTTPProxy.should_start = True
STATE.mkdir(parents=True, exist_ok=True)
os.chmod(STATE, 0o700)
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
c.JupyterHub.cleanup_servers = True   # stopping the hub stops every learner's server
c.JupyterHub.cleanup_proxy = True

c.JupyterHub.authenticator_class = ClassroomAuthenticator
c.ClassroomAuthenticator.user_password = PASSWORD
c.Authenticator.allowed_users = LEARNERS
c.Authenticator.admin_users = ADMINS
c.LocalAuthenticator.create_system_users = True
c.LocalAuthenticator.add_user_cmd = ["useradd", "--create-home", "--shell", "/bin/bash"]

c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"
c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.args = LAB_SETTINGS
c.Spawner.notebook_dir = f"~/{WORKSPACE}"
c.Spawner.default_url = "/lab/tree/notebooks/00_setup.ipynb"
c.Spawner.pre_spawn_hook = prepare_workspace
c.Spawner.http_timeout = 120   # a loaded 2-core machine starts a server in 10-60 s
c.Spawner.start_timeout = 180
c.Spawner.environment = {
    "PYTHONPATH": _pythonpath,          # the kernels import the workspace's course_lib
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "COURSE_SLOTS_DIR": os.environ.get("COURSE_SLOTS_DIR", "/tmp/course-slots"),  # one queue for the room
}
# nbgrader (make room installs it, requirements/assessment.txt): the Assignments tab fetches and submits through
# this exchange (classroom/README.md, "Assessment").
c.Spawner.environment["JUPYTER_CONFIG_PATH"] = str(COURSE / "classroom" / "nbgrader-learner")
c.Spawner.environment["COURSE_ROOM_EXCHANGE"] = os.environ.get("COURSE_ROOM_EXCHANGE", "/srv/nbgrader/exchange")
if os.environ.get("COURSE_SLOTS"):   # the instructor keeps only the first N cores for learners' runs
    c.Spawner.environment["COURSE_SLOTS"] = os.environ["COURSE_SLOTS"]
if TFDS.is_dir():
    c.Spawner.environment["TFDS_DATA_DIR"] = str(TFDS)
