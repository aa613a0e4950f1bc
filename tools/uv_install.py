"""Install with uv, configured as pip is on this machine, or say why not (exit status 3: use pip).

``tools/setup.sh`` installs the pinned stack (about 190 packages, TensorFlow among them) with uv where it can:
uv downloads in parallel and links files from its cache, so a second set-up on a machine takes seconds where pip
takes minutes (measured in ``tools/maintainers/results/2026-11-26-vm-check-time-uv-and-cuts.md``). But uv does not read pip's
configuration (``pip.conf``, ``PIP_*``), where a machine or a university names its package mirror, a local
wheel folder, a machine-wide constraints file or a CA certificate. So this script asks the venv's pip for its
configuration (``pip config list``, which includes the ``PIP_*`` variables), passes each setting to uv as the
matching option, and installs. A setting it has no translation for is not guessed: the script exits with
status 3 without installing anything, naming the setting, and set-up installs with pip instead (as it does
when uv cannot be installed, or when ``COURSE_NO_UV=1``).

    python tools/uv_install.py UV PYTHON [uv pip install arguments...]

Introduced by the set-up (``tools/setup.sh``, step 3); nothing in the notebooks uses it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Iterable

#: pip setting -> uv option taking each of the setting's whitespace-separated values.
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint", "trusted-host": "--allow-insecure-host"}
#: pip settings that are passed in uv's environment instead.
ENVIRONMENT = {"cert": "SSL_CERT_FILE", "timeout": "UV_HTTP_TIMEOUT", "default-timeout": "UV_HTTP_TIMEOUT"}
#: pip settings that change nothing about what is installed from where.
HARMLESS = {"disable-pip-version-check", "no-color", "progress-bar", "quiet", "verbose", "root-user-action",
            "no-python-version-warning", "no-input", "require-virtualenv", "cache-dir", "no-cache-dir"}
#: pip's `config list` sections, most general first (a later one overrides an earlier one, as in pip).
SECTIONS = ("global", "install", ":env:")

UNTRANSLATABLE = 3


def parse_config(lines: Iterable[str]) -> dict[str, str]:
    """``pip config list`` lines (``section.key='value'``) -> ``{key: value}``, later sections winning.

    Args:
        lines: The lines ``python -m pip config list`` prints.

    Returns:
        The settings for ``pip install``: ``global``, then ``install``, then ``PIP_*`` (``:env:``).

    Raises:
        ValueError: A line that is not ``section.key=value``.
    """
    by_section: dict[str, dict[str, str]] = {}
    for line in lines:
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        section, dot, key = name.rpartition(".")
        if not sep or not dot:
            raise ValueError(f"unexpected `pip config list` line: {line!r}")
        try:
            words = shlex.split(value)
        except ValueError as error:
            raise ValueError(f"unexpected `pip config list` line: {line!r} ({error})") from None
        by_section.setdefault(section, {})[key.replace("_", "-")] = " ".join(words)
    settings: dict[str, str] = {}
    for section in SECTIONS:
        settings.update(by_section.get(section, {}))
    return settings


def translate(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """pip's settings -> (uv options, uv environment).

    Args:
        settings: :func:`parse_config`'s result.

    Returns:
        The options to add to ``uv pip install``, and variables for its environment. The index strategy is
        pip's (every index and link is searched for the best version: ``--index-strategy unsafe-best-match``).

    Raises:
        KeyError: A setting with no translation (its name is the message).
    """
    options = ["--index-strategy", "unsafe-best-match"]
    environment: dict[str, str] = {}
    for key, value in settings.items():
        if key in OPTIONS:
            for word in value.split():
                options += [OPTIONS[key], word]
        elif key in ENVIRONMENT:
            environment[ENVIRONMENT[key]] = value
        elif key == "no-index" and value.lower() in ("1", "true", "yes", "on"):
            options.append("--no-index")
        elif key not in HARMLESS:
            raise KeyError(key)
    return options, environment


def main(argv: list[str]) -> int:
    """Install ``argv[2:]`` with the uv at ``argv[0]`` into the interpreter ``argv[1]``; see the module doc."""
    if len(argv) < 3:
        print("usage: uv_install.py UV PYTHON [uv pip install arguments...]", file=sys.stderr)
        return 2
    uv, python, args = argv[0], argv[1], argv[2:]
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True)
    if listed.returncode != 0:
        print(f"[setup] pip config list failed ({listed.stderr.strip()[-300:]}): installing with pip",
              file=sys.stderr)
        return UNTRANSLATABLE
    try:
        options, environment = translate(parse_config(listed.stdout.splitlines()))
    except (KeyError, ValueError) as error:
        print(f"[setup] pip's setting {error} has no uv equivalent here: installing with pip", file=sys.stderr)
        return UNTRANSLATABLE
    command = [uv, "pip", "install", "--python", python, *options, *args]
    return subprocess.run(command, env={**os.environ, **environment}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
