"""The room (``make room``, classroom/jupyterhub_config.py): two learners, two servers, no shared files.

The hub is started as ``make room`` starts it, on free loopback ports, with a scratch state folder and a
scratch learner edition; two Unix users are created for the test (unique names) and removed at the end. Both
log in with the room's password through the login form, start their servers, and then:

- each reads their own workspace through their server (the positive control);
- learner A gets 403/404 for learner B's files via B's server URL (``/user/B/files/...``), via B's contents
  API with A's cookies, and with an API token of A's; B's README text never appears in A's answers;
- A's Unix account cannot read B's workspace on disk (B's home is 0700).

Both servers are stopped through the API, the hub is stopped, and the test FAILS if the hub, the proxy or a
single-user server (any process of the two users) is left. Must run as root (the hub starts servers as other
users): not root is a failure with the remedy, never a skip.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest
import requests

from tests import traversal

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("COURSE_VENV", ROOT / ".venv"))
CONFIG = ROOT / "classroom" / "jupyterhub_config.py"
PROXY = ROOT / "build" / "classroom-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
pytestmark = [pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(what: str, probe, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} not ready after {timeout:.0f} s; hub log:\n{log.read_text()[-4000:]}", pytrace=False)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _processes_of(names: list[str], api_port: int, hub_pid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid", "username", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or ())
            if (proc.info["username"] in names or proc.pid == hub_pid
                    or ("configurable-http-proxy" in cmdline and str(api_port) in cmdline)):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _open_for_traversal() -> dict[Path, int]:
    """Open, for traversal only (o+x), the folders that keep learners from the venv's Python; returns old modes.

    The room refuses to start when the learners cannot run the course's Python (classroom/jupyterhub_config.py
    says so, with the remedies for a real room). On this machine and in CI that Python is pyenv's, under
    /root (mode 0700), so the test grants what the remedy says for its own duration and restores the exact
    modes as soon as the room is stopped (also when the test fails).
    """
    return traversal.open_for_traversal((VENV / "bin" / "python", VENV / "bin" / "jupyterhub-singleuser",
                                         ROOT / "course_lib"))


def _restore_modes(opened: dict[Path, int]):
    def restore() -> None:
        traversal.restore(opened)
    return restore


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    if os.geteuid() != 0:
        pytest.fail("tests/test_room.py must run as root (the hub starts each learner's server as that Unix "
                    "user): run `sudo make test`, or deselect it on purpose with --deselect tests/test_room.py",
                    pytrace=False)
    for needed, remedy in ((PROXY, "run `make setup` (npm ci of classroom/package-lock.json)"),
                           (VENV / "bin" / "jupyterhub", "run `make setup` (pip installs jupyterhub)")):
        if not needed.exists():
            pytest.fail(f"{needed} is missing: {remedy}", pytrace=False)
    base = tmp_path_factory.mktemp("room")
    spec = importlib.util.spec_from_file_location("student_tool", ROOT / "tools" / "student.py")
    student = importlib.util.module_from_spec(spec)
    sys.modules["student_tool"] = student  # its dataclasses look their module up
    spec.loader.exec_module(student)
    student.build(base / "student")
    tag = secrets.token_hex(3)
    names = [f"crt{tag}a", f"crt{tag}b"]
    assert not any(_user_exists(n) for n in names)
    password = secrets.token_urlsafe(12)
    port, hub_port, api_port = _free_port(), _free_port(), _free_port()
    env = {**os.environ, "COURSE_ROOM_USERS": ",".join(names), "COURSE_ROOM_PASSWORD": password,
           "COURSE_ROOM_PORT": str(port), "COURSE_ROOM_IP": "127.0.0.1", "COURSE_ROOM_HUB_PORT": str(hub_port),
           "COURSE_ROOM_API_PORT": str(api_port), "COURSE_ROOM_STATE": str(base / "state"),
           "COURSE_STUDENT_DIR": str(base / "student"), "COURSE_VENV": str(VENV),
           "COURSE_SLOTS": "1"}  # the instructor's core limit, which every learner's server must inherit
    log = base / "hub.log"
    restore_modes = _restore_modes(_open_for_traversal())
    with log.open("w") as out:
        hub = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", str(CONFIG)], cwd=base, env=env,
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    info = {"url": url, "names": names, "password": password, "log": log, "hub": hub}
    try:
        def hub_ready() -> bool:
            if hub.poll() is not None:  # a configuration error (RoomError) ends it at once: show why
                pytest.fail(f"the hub exited with {hub.returncode}:\n{log.read_text()[-3000:]}", pytrace=False)
            return _get_ok(f"{url}/hub/api/")
        _wait("the hub", hub_ready, 90, log)
        yield info
    finally:
        try:
            problems = _stop(hub, names, api_port)
        finally:
            restore_modes()
        for name in names:
            if _user_exists(name):
                subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)
        assert not [n for n in names if _user_exists(n)], "the test's users could not be removed"
        assert not problems, "left running after the room stopped (now killed):\n" + "\n".join(problems)


def _get_ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def _stop(hub: subprocess.Popen, names: list[str], api_port: int) -> list[str]:
    """SIGTERM the hub (it stops the servers and the proxy: cleanup_servers/cleanup_proxy), wait, then list
    and kill whatever is left."""
    if hub.poll() is None:
        hub.send_signal(signal.SIGTERM)
        try:
            hub.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + 20
    left = _processes_of(names, api_port, hub.pid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _processes_of(names, api_port, hub.pid)
    problems = [f"pid {p.pid} ({p.info['username']}): {' '.join(p.info['cmdline'] or ())[:150]}" for p in left]
    for proc in left:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    if hub.poll() is None:
        hub.kill()
        hub.wait(timeout=30)
    return problems


def _login(room: dict, name: str) -> requests.Session:
    session = requests.Session()
    form = session.get(f"{room['url']}/hub/login", timeout=30)
    assert form.status_code == 200
    done = session.post(f"{room['url']}/hub/login", timeout=60, allow_redirects=True,
                        data={"username": name, "password": room["password"], "_xsrf": session.cookies.get("_xsrf")})
    assert done.status_code == 200 and "/hub/login" not in done.url, f"{name} could not log in: {done.url}"
    return session


def _xsrf(session: requests.Session) -> dict[str, str]:
    return {"X-XSRFToken": session.cookies.get("_xsrf", path="/hub/") or session.cookies.get("_xsrf") or ""}


def _start(room: dict, session: requests.Session, name: str) -> None:
    started = session.post(f"{room['url']}/hub/api/users/{name}/server", headers=_xsrf(session), timeout=60)
    # Logging in follows the hub's redirect to /hub/spawn, which may already have started the server.
    already = started.status_code == 400 and "already running" in started.text
    assert started.status_code in (201, 202) or already, \
        f"{name}'s server: {started.status_code} {started.text[:300]}"

    def ready() -> bool:
        answer = session.get(f"{room['url']}/hub/api/users/{name}", headers=_xsrf(session), timeout=30).json()
        server = answer.get("servers", {}).get("", {})
        return bool(server.get("ready"))
    _wait(f"{name}'s server", ready, 240, room["log"])


@pytest.fixture(scope="module")
def learners(room: dict) -> Iterator[dict]:
    a, b = room["names"]
    sessions = {a: _login(room, a), b: _login(room, b)}
    for name, session in sessions.items():
        _start(room, session, name)
    yield sessions
    for name, session in sessions.items():
        stopped = session.delete(f"{room['url']}/hub/api/users/{name}/server", headers=_xsrf(session), timeout=120)
        assert stopped.status_code in (202, 204), f"{name}'s server did not stop: {stopped.status_code}"


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_each_learner_reads_their_own_workspace(room: dict, learners: dict) -> None:
    for name, session in learners.items():
        own = session.get(f"{room['url']}/user/{name}/files/README.md", timeout=60)
        assert own.status_code == 200 and "learner edition" in own.text, (name, own.status_code, own.url)
        listing = session.get(f"{room['url']}/user/{name}/api/contents/notebooks", timeout=60)
        assert listing.status_code == 200
        assert "00_setup.ipynb" in {item["name"] for item in listing.json()["content"]}
        home = Path(pwd.getpwnam(name).pw_dir)
        assert (home / "course" / "notebooks" / "00_setup.ipynb").stat().st_uid == pwd.getpwnam(name).pw_uid
        assert not (home / "course" / "instructor").exists()


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_every_learner_s_server_inherits_the_room_s_core_limit(room: dict, learners: dict) -> None:
    """``COURSE_SLOTS=N`` in the hub's environment limits learners' runs (classroom/README.md); JupyterHub passes
    a server only the variables its spawner names, so the server's own environment must hold it."""
    for name in learners:
        servers = [p for p in psutil.process_iter(["username", "cmdline"])
                   if p.info["username"] == name and any("jupyterhub-singleuser" in a for a in p.info["cmdline"] or ())]
        assert servers, f"no server process of {name}"
        assert all(p.environ().get("COURSE_SLOTS") == "1" for p in servers), name


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_a_learner_cannot_open_another_learners_files(room: dict, learners: dict) -> None:
    a, b = room["names"]
    session = learners[a]
    secret = "learner edition"  # B's README says it; A's answers must never contain it
    for path in (f"/user/{b}/files/README.md", f"/user/{b}/api/contents/README.md",
                 f"/user/{b}/api/contents/notebooks", f"/user/{b}/lab/tree/README.md"):
        answer = session.get(room["url"] + path, timeout=60)
        assert answer.status_code in (403, 404), f"A got {answer.status_code} for {path} (final URL {answer.url})"
        assert secret not in answer.text and "00_setup.ipynb" not in answer.text, path
    token = session.post(f"{room['url']}/hub/api/users/{a}/tokens", headers=_xsrf(session), timeout=30,
                         json={"note": "test_room", "expires_in": 600})
    assert token.status_code in (200, 201), token.text[:300]
    bare = requests.get(f"{room['url']}/user/{b}/api/contents/README.md", timeout=60,
                        headers={"Authorization": f"token {token.json()['token']}"})
    assert bare.status_code in (403, 404) and secret not in bare.text, bare.status_code
    own = requests.get(f"{room['url']}/user/{a}/api/contents/README.md", timeout=60,
                       headers={"Authorization": f"token {token.json()['token']}"})
    assert own.status_code == 200, "A's token works on A's own server (so the 403 above is B's wall)"
    on_disk = subprocess.run(["runuser", "-u", a, "--", "cat", f"{pwd.getpwnam(b).pw_dir}/course/README.md"],
                             capture_output=True, text=True, timeout=30)
    assert on_disk.returncode != 0 and "Permission denied" in on_disk.stderr, on_disk
