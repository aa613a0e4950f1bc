"""``horovodrun`` without its per-launch build check: Horovod's own launcher, the check's answers kept.

Before it starts a single rank, ``horovodrun`` asks whether Horovod was built with MPI (and, for
``--gloo`` or elastic runs, with Gloo). Each question forks a process that imports
``horovod.tensorflow``, that is TensorFlow (``horovod.common.util._check_extension_lambda``): about 5 s
on a quiet 2-core machine, 10 s on a busy one, on every launch, although the answer changes only when
Horovod is reinstalled. The course launches ``horovodrun`` a few dozen times in its notebooks and tests.

``python -m course_lib.runner.horovodrun ARGS`` is ``horovodrun ARGS``: it calls Horovod's own
``horovod.runner.launch.run_commandline`` with the same arguments. Only the build questions
(``mpi_built``, ``gloo_built``, ``nccl_built``, ``ddl_built``, ``ccl_built``) are answered from a file
kept per installed extension: the key is this interpreter and the path, size, modification time and inode
of every Horovod extension library that exists (``horovod/{tensorflow,torch,mxnet}/mpi_lib*.so``), so a
reinstalled Horovod is asked again. A question not kept yet is asked of Horovod the usual way and its
answer kept; set-up keeps the answers its own check of a new Horovod learned (:func:`remember_answers`).
``--verbose`` questions (``horovodrun --check-build --verbose``) always go to Horovod. An
unreadable or unwritable file only costs the check's time.

The file is ``horovod-build-check.json`` in the course's cache folder (``$COURSE_BUILD_CACHE``, else
``$XDG_CACHE_HOME/course-dl``, else ``~/.cache/course-dl``: :func:`course_lib.training.files.cache_dir`, also
the folder of set-up's wheel cache).

It also fixes Horovod's Gloo rendezvous server, so that a rank can restart Horovod in one launch
(:mod:`course_lib.runner.gloo_rendezvous`).

On a cluster, type ``horovodrun`` itself; both take the same arguments and start the same ranks (a launch
that restarts Horovod, ``allreduce_bench.py --cycle-times``, can fail there on that bug).

Introduced in notebooks/03_horovod.ipynb (:func:`course_lib.runner.launch.run_horovod` starts every
Horovod run through it).
"""

from __future__ import annotations

import hashlib
import json
import sys
import sysconfig
from pathlib import Path
from typing import Any, Callable, Mapping

from course_lib.runner.gloo_rendezvous import fix_scope_clearing
from course_lib.training.files import atomic_write_text, cache_dir

__all__ = ["CHECKS", "FILE_NAME", "cache_file", "extension_key", "keep_answers", "remember_answers", "main"]

#: The build questions horovodrun asks (names in ``horovod.runner.launch``).
CHECKS = ("mpi_built", "gloo_built", "nccl_built", "ddl_built", "ccl_built")
FILE_NAME = "horovod-build-check.json"
_FRAMEWORKS = ("tensorflow", "torch", "mxnet")  # horovod.common.util.EXTENSIONS
_KEEP = 8  # installs remembered


def cache_file(env: Mapping[str, str] | None = None) -> Path:
    """Where the answers are kept: :data:`FILE_NAME` in the course's cache folder (``files.cache_dir``)."""
    return cache_dir(env) / FILE_NAME


def extension_key(horovod_dir: Path, python: str = sys.executable) -> str | None:
    """A key that changes whenever an installed Horovod extension library does (``None``: none is installed)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    parts = [python]
    for framework in _FRAMEWORKS:
        library = horovod_dir / framework / f"mpi_lib{suffix}"
        try:
            stat = library.stat()
        except OSError:
            continue
        parts.append(f"{library}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}")
    if len(parts) == 1:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` whole (``files.atomic_write_text``), or leave it as it was: a file that cannot be
    written only costs the check's time. Keys keep their order: the oldest install goes first."""
    try:
        atomic_write_text(path, json.dumps(data, indent=1))
    except OSError:
        pass


def _store(path: Path, key: str, answers: Mapping[str, bool | None]) -> None:
    """Add ``answers`` to ``key``'s entry in ``path`` (the newest installs kept, the oldest dropped)."""
    data = _read(path)
    entry = data.pop(key, None)
    entry = {**(entry if isinstance(entry, dict) else {}), **answers}
    kept_keys = list(data)[-(_KEEP - 1):]  # the newest installs (several venvs share the file)
    _write(path, {**{k: data[k] for k in kept_keys}, key: entry})


def remember_answers(answers: Mapping[str, bool], horovod_dir: Path | None = None,
                     path: Path | None = None) -> bool:
    """Keep build answers learned elsewhere for the installed Horovod, so launches need not ask them.

    Set-up's check of a new Horovod (tools/setup.sh) imports its TensorFlow extension anyway and learns
    ``mpi_built`` and ``gloo_built`` there: kept, a fresh clone's first launches skip the questions (one
    TensorFlow import each).

    Args:
        answers: Build questions of :data:`CHECKS` and their answers (``True``/``False``).
        horovod_dir: The installed ``horovod`` package folder (default: the one this interpreter imports).
        path: The file (default :func:`cache_file`).

    Returns:
        ``False`` when no Horovod extension is installed (nothing kept).

    Raises:
        ValueError: A name that is not a build question, or an answer that is not a bool.
    """
    wrong = {k: v for k, v in answers.items() if k not in CHECKS or not isinstance(v, bool)}
    if wrong:
        raise ValueError(f"expected answers to {CHECKS} as True/False, got {wrong}")
    if horovod_dir is None:
        import horovod

        horovod_dir = Path(horovod.__file__).parent
    key = extension_key(horovod_dir)
    if key is None:
        return False
    _store(path or cache_file(), key, dict(answers))
    return True


def keep_answers(module: Any, key: str, path: Path) -> None:
    """Replace ``module``'s build questions by ones that answer from ``path`` under ``key``.

    Args:
        module: ``horovod.runner.launch`` (or a stand-in with the functions of :data:`CHECKS`).
        key: :func:`extension_key` of the installed Horovod.
        path: :func:`cache_file`.
    """
    def kept(name: str, ask: Callable[..., Any]) -> Callable[..., Any]:
        def answer(verbose: bool = False) -> Any:
            if verbose:
                return ask(verbose=True)
            answers = _read(path).get(key)
            if isinstance(answers, dict) and name in answers:
                return answers[name]
            result = ask(verbose=False)
            if isinstance(result, (bool, type(None))):
                _store(path, key, {name: result})
            return result
        answer.__name__ = name
        answer.__doc__ = f"horovod's {name}, answered from {path} when kept"
        return answer

    for name in CHECKS:
        setattr(module, name, kept(name, getattr(module, name)))


def main(argv: list[str] | None = None) -> None:
    """Run horovodrun with ``argv`` (default: this process's arguments), its build check answered from the file
    and its Gloo rendezvous server fixed for restarts (:mod:`course_lib.runner.gloo_rendezvous`)."""
    import horovod
    from horovod.runner import launch
    from horovod.runner.http import http_server

    fix_scope_clearing(http_server.RendezvousHandler)

    key = extension_key(Path(horovod.__file__).parent)
    if key is not None:
        keep_answers(launch, key, cache_file())
    sys.argv = ["horovodrun", *(sys.argv[1:] if argv is None else argv)]
    launch.run_commandline()  # raises (exit status 1) when a rank fails, as horovodrun does


if __name__ == "__main__":
    main()
