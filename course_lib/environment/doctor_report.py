"""The doctor's report: one line per check with its remedy, a verdict, and the checks of installed versions.

Every check of ``python -m course_lib doctor`` (:mod:`course_lib.environment.doctor`) is a :class:`Check`; the
:class:`DoctorReport` prints them and says whether the course can run. :func:`check_version` compares an installed
package with its pin in ``requirements/constraints.txt`` (:func:`pin`); :func:`package_version` is the course's one
reader of installed versions.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
from dataclasses import dataclass, field

from course_lib.training.files import course_root

__all__ = ["Check", "DoctorReport", "SETUP_HINT", "package_version", "pin", "check_version"]

SETUP_HINT = "run `make setup` in the course folder (it installs the pinned stack into .venv)"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report.

    Attributes:
        name: What was checked, e.g. ``"TensorFlow"``.
        status: ``"ok"``, ``"warn"`` (works, but worth knowing) or ``"fail"`` (the course needs it).
        detail: What was found.
        remedy: The exact command or step that fixes a failure or warning ("" when ok).
    """

    name: str
    status: str
    detail: str
    remedy: str = ""

    def line(self) -> str:
        """The report line: status tag, name, detail, and ``→ remedy`` where there is one."""
        tag = {"ok": "  ok", "warn": "warn", "fail": "FAIL"}[self.status]
        text = f"[{tag}] {self.name}: {self.detail}"
        return f"{text}\n       → {self.remedy}" if self.remedy else text


@dataclass
class DoctorReport:
    """All checks, in order. ``ok`` is False when any check failed."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.status != "fail" for check in self.checks)

    def text(self) -> str:
        """The printed report, ending with a one-line verdict."""
        lines = [check.line() for check in self.checks]
        failed = [c.name for c in self.checks if c.status == "fail"]
        lines.append("Verdict: ready for the course." if not failed
                     else f"Verdict: NOT ready — fix: {', '.join(failed)}.")
        return "\n".join(lines)


def package_version(*dists: str) -> str | None:
    """Installed version of the first of ``dists`` that is installed, or None (nothing is imported)."""
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def pin(name: str) -> str | None:
    """The pinned version of ``name`` from requirements/constraints.txt, when the file is present."""
    constraints = course_root() / "requirements" / "constraints.txt"
    if not constraints.is_file():
        return None
    pattern = re.compile(rf"^{re.escape(name)}==(\S+)", re.IGNORECASE)
    for raw in constraints.read_text().splitlines():
        match = pattern.match(raw.strip())
        if match:
            return match.group(1)
    return None


def check_version(name: str, dists: tuple[str, ...], pin_name: str) -> Check:
    """The check of one package: installed (the first of ``dists`` found) and at its pin, named ``name``."""
    found = package_version(*dists)
    wanted = pin(pin_name)
    if found is None:
        return Check(name, "fail", "not installed", SETUP_HINT)
    if wanted and found != wanted:
        return Check(name, "fail", f"{found} installed, the course is tested with {wanted}",
                     f"{SETUP_HINT} (or: pip install -c requirements/constraints.txt {pin_name}=={wanted})")
    return Check(name, "ok", found)

