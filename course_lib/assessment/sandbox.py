"""A submission's code, contained: a dedicated unprivileged user in its own namespaces, ended by the watchdog.

The mechanism (Linux, run by root: the room's grader): util-linux's ``unshare`` gives the submission new mount,
PID, network, IPC and UTS namespaces; inside them a small shell script (:data:`_SETUP`) builds a new root on a
tmpfs that holds only what a kernel needs, bind-mounted READ-ONLY (``/usr``, ``/etc``, the interpreter, the venv,
the course's ``course_lib`` and ``source_code``, the data), the submission's own scratch copy READ-WRITE at its own
path, and a small private ``/tmp`` and ``/dev/shm``; brings up the loopback interface (the only one the new network
namespace has); ``chroot``\\ s into it and drops to the dedicated user with ``setpriv`` (no groups, no capabilities,
``no_new_privs``), with ``env -i`` and the few variables :data:`PASSED_ENV` names: no hub token, no API URL. So the
gradebook, the assignment's sources, the release folder, the exchange and every other submission are not in its
file system at all, and the course cannot be changed. Limits: a cgroup (v1 ``memory`` and ``pids`` controllers, or
v2) caps its memory and its number of processes; ``prlimit`` caps the size of a file it writes and its open files.
When the command ends, times out or its caller stops it, every process in the cgroup is ended with the course's
watchdog's :func:`course_lib.runner.procs.watchdog.end_tree` (and the PID namespace dies with its first process).

Introduced in assessment/source/ddp/assessment.ipynb (the room's grading, classroom/README.md).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import nbformat

from course_lib.assessment import spec
from course_lib.assessment.code import CodeGrade, Part
from course_lib.assessment.confine import Limits, _Cgroup, ensure_user, remove_user
from course_lib.runner.procs.watchdog import end_tree
from course_lib.training.data import resolve_data_dir

__all__ = ["Limits", "Sandbox", "SandboxResult", "PASSED_ENV", "ensure_user", "remove_user"]

#: The only variables a contained command sees (besides HOME, PATH, LANG and what the caller adds explicitly).
PASSED_ENV = ("COURSE_TFDS_DIR", "TFDS_DATA_DIR", "COURSE_DATA_DIR", "TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS")


def _data_dir() -> str | None:
    """The grader's prepared Fashion-MNIST folder (:func:`course_lib.training.data.resolve_data_dir`), if it exists:
    the submission reads it, read-only, instead of preparing its own copy."""
    folder = resolve_data_dir()
    return str(folder) if folder.is_dir() else None

_SETUP = r"""
set -eu
root=$(mktemp -d /tmp/course-sandbox.XXXXXX)
mount -t tmpfs -o size=16m,mode=755 sandbox-root "$root"
ro() {  # ro SRC: SRC at the same path in the new root, read-only (a link stays a link)
  src=$1; dst="$root$src"
  if [ -L "$src" ]; then mkdir -p "$(dirname "$dst")"; ln -sfn "$(readlink "$src")" "$dst"; return; fi
  if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; : > "$dst"; fi
  mount --rbind "$src" "$dst"; mount -o remount,bind,ro "$dst"
}
mkdir -p "$root/tmp" "$root/dev/shm" "$root/proc"
mount -t tmpfs -o size="$SANDBOX_TMP_MB"m,mode=1777 sandbox-tmp "$root/tmp"
mount -t tmpfs -o size="$SANDBOX_TMP_MB"m,mode=1777 sandbox-shm "$root/dev/shm"
for p in $SANDBOX_RO; do [ -e "$p" ] && ro "$p"; done  # after /tmp: a folder under /tmp stays visible
mkdir -p "$root$SANDBOX_WORK"; mount --bind "$SANDBOX_WORK" "$root$SANDBOX_WORK"
for d in null zero random urandom; do : > "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"; done
mount -t proc proc "$root/proc"
ip link set lo up 2>/dev/null || python3 -c 'pass'
exec chroot "$root" setpriv --reuid="$SANDBOX_UID" --regid="$SANDBOX_GID" --clear-groups --no-new-privs \
  --inh-caps=-all --bounding-set=-all -- \
  prlimit --fsize="$SANDBOX_FSIZE" --nofile=1024 -- \
  env -i -C "$SANDBOX_WORK" $SANDBOX_ENV "$@"
"""


@dataclass
class SandboxResult:
    """How a contained command ended."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    memory_peak_mb: float = 0.0
    notes: list[str] = field(default_factory=list)


class Sandbox:
    """Runs commands as ``user`` in fresh namespaces where only ``work`` is writable.

    Args:
        user: The dedicated unprivileged user (see :func:`ensure_user`).
        readonly: Paths visible read-only at the same place (default: the system, this interpreter and venv, the
            course's ``course_lib`` and ``source_code``, and the data folders named in the environment).
        limits: Memory, processes, file size, private ``/tmp`` (default: ``Limits()``).
        env: Extra variables for the command (besides :data:`PASSED_ENV` taken from this process).
    """

    def __init__(self, user: str, *, readonly: Sequence[str | os.PathLike[str]] | None = None,
                 limits: Limits | None = None, env: dict[str, str] | None = None) -> None:
        if os.geteuid() != 0:
            raise PermissionError("the grading sandbox needs root (it creates namespaces and drops to a grading "
                                  "user): run the grader with sudo")
        for tool in ("unshare", "setpriv", "chroot", "prlimit", "mount"):
            if shutil.which(tool) is None:
                raise FileNotFoundError(f"{tool} is missing: install util-linux (Debian: apt-get install util-linux)")
        self.user, self.limits, self.extra_env = user, limits or Limits(), dict(env or {})
        self.uid, self.gid = ensure_user(user)
        self.readonly = [str(p) for p in (readonly if readonly is not None else self.default_readonly())]

    @staticmethod
    def default_readonly() -> list[str]:
        """The system folders, this Python, its venv, the course's code and the data: nothing else."""
        course = Path(__file__).resolve().parents[2]
        paths = ["/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc", sys.prefix, sys.base_prefix,
                 str(Path(os.path.realpath(sys.executable)).parent.parent),
                 str(course / "course_lib"), str(course / "source_code"), str(course / "pyproject.toml"),
                 str(course / "assessment" / "pilot.json")]
        paths += [os.environ[v] for v in ("TFDS_DATA_DIR", "COURSE_DATA_DIR") if os.environ.get(v)]
        paths += [folder for folder in [_data_dir()] if folder]
        paths += [os.path.realpath(p) for p in paths]  # a linked venv: the link and what it points to
        return list(dict.fromkeys(paths))

    def _env(self, work: Path) -> str:
        env = {"HOME": str(work), "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
               "COURSE_SLOTS_DIR": "/tmp/course-slots", "MPLCONFIGDIR": "/tmp/mpl",
               "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        env.update({v: os.environ[v] for v in PASSED_ENV if v in os.environ})
        if _data_dir():
            env["COURSE_TFDS_DIR"] = str(_data_dir())
        env.update(self.extra_env)
        return " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())

    def run(self, argv: Sequence[str], work: str | os.PathLike[str], *, timeout: float = 600,
            stdin: str | None = None, pass_fds: Sequence[int] = ()) -> SandboxResult:
        """Run ``argv`` contained, in ``work`` (made the user's own; its only writable folder).

        Returns:
            The :class:`SandboxResult`; a timed-out command's processes are all ended first.
        """
        work = Path(work).resolve()
        for path in [work, *work.rglob("*")]:
            os.lchown(path, self.uid, self.gid)
        work.chmod(0o700)
        group = _Cgroup(f"course-grade-{uuid.uuid4().hex[:10]}", self.limits)
        env = {**{k: v for k, v in os.environ.items() if k in ("PATH",)},
               "SANDBOX_RO": " ".join(self.readonly), "SANDBOX_WORK": str(work), "SANDBOX_UID": str(self.uid),
               "SANDBOX_GID": str(self.gid), "SANDBOX_FSIZE": str(self.limits.file_mb << 20),
               "SANDBOX_TMP_MB": str(self.limits.tmp_mb), "SANDBOX_ENV": self._env(work)}
        command = ["unshare", "--mount", "--propagation", "private", "--net", "--pid", "--fork", "--ipc", "--uts",
                   "--kill-child", "--", "/bin/sh", "-c", _SETUP, "sandbox", *argv]
        start, timed_out = time.monotonic(), False
        proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                preexec_fn=group.enter, start_new_session=True, pass_fds=tuple(pass_fds))
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            end_tree(lambda: [p for p in map(_process, group.pids() + [proc.pid]) if p is not None],
                     grace_s=(1.0, 1.0), group=proc.pid)
            out, err = proc.communicate()
        finally:
            end_tree(lambda: [p for p in map(_process, group.pids()) if p is not None], grace_s=(0.5, 0.5))
            peak = group.peak_mb()
            group.remove()
        return SandboxResult(proc.returncode, out, err, timed_out, time.monotonic() - start, peak)

    def _with_result_pipe(self, argv: Sequence[str], work: Path, timeout: float) -> tuple[SandboxResult, bytes]:
        """Run ``argv + ["--result-fd", N]`` contained; what it wrote on that pipe (never a file it could forge)."""
        read_end, write_end = os.pipe()
        chunks: list[bytes] = []
        reader = threading.Thread(target=_drain, args=(read_end, chunks), daemon=True)
        reader.start()
        try:
            result = self.run([*argv, "--result-fd", str(write_end)], work, timeout=timeout, pass_fds=(write_end,))
        finally:
            os.close(write_end)
            reader.join(timeout=30)
        return result, b"".join(chunks)

    def grade_code(self, script: str | os.PathLike[str], work: str | os.PathLike[str], *,
                   timeout: float = 1800) -> Any:
        """The code task graded contained: :func:`course_lib.assessment.code.grade_code` as the sandbox's first
        process, the script and its ranks as the grading user. Returns a ``CodeGrade`` (every part 0 with the
        reason when the grading itself did not finish)."""
        result, raw = self._with_result_pipe([sys.executable, "-m", "course_lib.assessment.code", str(script)],
                                             Path(work), timeout)
        grade = CodeGrade()
        try:
            grade.parts = {name: Part(name, int(v[0]), int(v[1]), str(v[2])) for name, v in json.loads(raw).items()}
        except ValueError:
            why = f"the grading launch did not finish (exit {result.returncode}, timed out: {result.timed_out})"
            grade.parts = {n: Part(n, 0, p, why) for n, p in spec.POINTS.items() if n.startswith("code_")}
        return grade

    def execute(self, nb: Any, work: str | os.PathLike[str], *, timeout: float = 1800,
                total_timeout: float | None = None) -> Any:
        """Execute notebook ``nb`` contained (kernel and all), in ``work``; returns the executed notebook (each
        cell's outputs capped by :mod:`course_lib.assessment.run_notebook`), or ``nb`` with an error on the first
        cell that did not run when the whole execution was stopped."""
        work = Path(work)
        nbformat.write(nb, work / ".graded.ipynb")
        result, raw = self._with_result_pipe([sys.executable, "-m", "course_lib.assessment.run_notebook",
                                              str(work / ".graded.ipynb"), "--timeout", str(timeout)], work,
                                             total_timeout or timeout * 4)
        try:  # what the runner wrote on its pipe, never the file the submission could write
            executed = nbformat.reads(raw.decode(), as_version=4)
        except Exception:  # the runner never finished: nothing ran as far as grading knows
            executed = nb
        executed.metadata["course_sandbox"] = {"returncode": result.returncode, "timed_out": result.timed_out,
                                               "stderr_tail": result.stderr[-2000:],
                                               "memory_peak_mb": round(result.memory_peak_mb, 1)}
        return executed


def _drain(fd: int, chunks: list[bytes]) -> None:
    with os.fdopen(fd, "rb") as pipe:
        for block in iter(lambda: pipe.read(65536), b""):
            chunks.append(block)


def _process(pid: int) -> Any:
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None
