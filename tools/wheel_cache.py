"""A cache of the Horovod wheel that set-up builds (tools/setup.sh, step 4), keyed by everything the build reads.

Building Horovod against TensorFlow is most of a fresh clone's set-up (minutes on 2 cores). The build depends
only on its inputs: the source package (its sha256), the course's patch, the Python version, the TensorFlow
it compiles against (:func:`built_against`: tensorflow-cpu and the CUDA-capable tensorflow wheel are told apart
by name, at the same version), the build variant (cpu/gpu), the HOROVOD_* build flags and the machine's architecture. Set-up asks this tool
for a wheel built from the same inputs; on a hit it installs that wheel (and checks it exactly as it checks a
fresh build: TensorFlow and Gloo load, the patch line is present); on a miss it builds a wheel, installs it and
stores it here. This is what pip does with the wheels it builds from source packages, which the course's
patched source folder does not get.

Usage (set-up runs it with the venv's Python)::

    python tools/wheel_cache.py built-against          # print what the build compiles against (a key part)
    python tools/wheel_cache.py key PART...            # print the key of these inputs
    python tools/wheel_cache.py find KEY               # print the cached wheel's path; exit 1 on a miss
    python tools/wheel_cache.py store KEY WHEEL        # keep a copy of WHEEL under KEY
    python tools/wheel_cache.py drop KEY               # forget KEY (a cached wheel that failed its checks)

The folder is ``$COURSE_BUILD_CACHE``, else ``$XDG_CACHE_HOME/course-dl``, else ``~/.cache/course-dl``.
``COURSE_NO_BUILD_CACHE=1`` makes set-up build every time. Introduced for issue 31 (the check's time).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from course_lib.training.files import cache_dir  # noqa: E402  (the course folder is on the path now)

__all__ = ["BUILT_AGAINST", "built_against", "cache_dir", "drop", "find", "key", "store"]

#: The distributions whose headers and libraries the Horovod build compiles and links against, by name: both
#: TensorFlow wheels are listed, so that a build against one never matches a venv holding the other.
BUILT_AGAINST = ("tensorflow", "tensorflow-cpu", "tf-keras", "numpy")


def built_against(version: Callable[[str], str] = metadata.version, python: str = sys.version) -> str:
    """The key part naming what a Horovod build compiles against: ``python`` (``sys.version``) and each of
    :data:`BUILT_AGAINST` as ``name==version`` (``name==-`` when it is not installed), e.g.
    ``3.12.1 (...) tensorflow==- tensorflow-cpu==2.18.1 tf-keras==2.18.0 numpy==2.0.2``.

    Args:
        version: Looks a distribution's version up (default: this interpreter's installed packages).
        python: The interpreter's version string.
    """
    def found(name: str) -> str:
        try:
            return version(name)
        except metadata.PackageNotFoundError:
            return "-"

    return " ".join([python, *(f"{name}=={found(name)}" for name in BUILT_AGAINST)])


def key(parts: list[str]) -> str:
    """A 24-hex-digit key of the build's inputs, in order; a part that is an absolute path to a file counts by
    the file's content.

    Raises:
        ValueError: No parts (a key of nothing would match every build).
    """
    if not parts:
        raise ValueError("key needs the build's inputs (e.g. the sdist sha256, the patch file, versions)")
    digest = hashlib.sha256()
    for part in parts:
        path = Path(part)
        data = path.read_bytes() if path.is_absolute() and path.is_file() else part.encode()
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()[:24]


def find(build_key: str, root: Path | None = None) -> Path | None:
    """The one wheel stored under ``build_key``, or None."""
    folder = (root or cache_dir()) / build_key
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    return wheels[0] if len(wheels) == 1 else None


def store(build_key: str, wheel: Path, root: Path | None = None) -> Path:
    """Copy ``wheel`` under ``build_key`` atomically (a copy cut short leaves nothing under the key).

    Raises:
        FileNotFoundError: ``wheel`` is not a ``.whl`` file.
    """
    if not (wheel.is_file() and wheel.suffix == ".whl"):
        raise FileNotFoundError(f"no wheel at {wheel}")
    root = root or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{build_key}.", dir=root))
    try:
        shutil.copy2(wheel, staging / wheel.name)
        final = root / build_key
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final / wheel.name


def drop(build_key: str, root: Path | None = None) -> None:
    """Forget ``build_key``'s wheel (nothing happens when there is none)."""
    shutil.rmtree((root or cache_dir()) / build_key, ignore_errors=True)


def main(argv: list[str]) -> int:
    command, args = (argv[0], argv[1:]) if argv else ("", [])
    if command == "built-against" and not args:
        print(built_against())
    elif command == "key" and args:
        print(key(args))
    elif command == "find" and len(args) == 1:
        found = find(args[0])
        if found is None:
            return 1
        print(found)
    elif command == "store" and len(args) == 2:
        print(store(args[0], Path(args[1])))
    elif command == "drop" and len(args) == 1:
        drop(args[0])
    else:
        print("usage: wheel_cache.py built-against | key PART... | find KEY | store KEY WHEEL | drop KEY",
              file=sys.stderr)
        return 2
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
