"""The keywords every launcher shares, declared once (:class:`RunOptions`), and the launch as one value (:class:`Launch`).

``run_horovod``, ``run_python`` (:mod:`course_lib.runner.launch`), ``run_mpirun``, ``run_elastic``,
``run_workers`` and ``run_multiworker`` (:mod:`course_lib.runner.multiworker`) take their own
arguments (script, workers, hosts, ...) and then ``**options`` of this one bundle, so a learner writes
``run_horovod(script, 2, timeout=300, output=...)`` as before, every launcher documents the same
keywords in one place, and an unknown keyword is one clear :class:`LaunchError` before anything starts.
The launcher checks them into a :class:`Launch` (:meth:`Launch.of`), adds what it built (the command,
its own name, what the run holds: :meth:`Launch.but`), and hands that one value to
:func:`course_lib.runner.execute.execute`, which passes it on to :mod:`course_lib.runner.processes`.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import difflib
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypedDict

from course_lib.runner.preflight import LaunchError, check_common, check_env
from course_lib.runner.slots import PlaceRequest

__all__ = ["RunOptions", "Launch", "OPTION_NAMES"]


class RunOptions(TypedDict, total=False):
    """The shared keywords of the launchers (all optional).

    Attributes:
        timeout: Seconds before the run is ended; ``None``: no limit (waiting for slots does not
            count). ``run_elastic`` and ``run_multiworker`` default to 300; ``run_workers`` needs one.
        env: Extra environment variables for the run (added to the current environment), each name
            and value a ``str``.
        show: Output shown while it runs: ``"rank0"``, ``"all"`` (with rank prefixes) or ``"none"``;
            the launcher's own lines are always shown (``run_python``: always ``"all"``).
        output: ``None`` (print), an ``ipywidgets.Output``, or a callable taking one line.
        check: Raise ``RunFailedError`` on a non-zero exit status (default ``True``).
        python: Interpreter of the ranks (default: this one).
        cwd: Working directory of the run (relative script paths are taken from it).
        stop_event: Set it from another thread to end the run (raises ``RunStoppedError``).
        on_event: Called with every JSON event dict as soon as its line arrives.
        grace_s: Seconds granted after SIGINT and after SIGTERM when ending a run (default 3, 3).
        clock: Monotonic clock for ``timeout`` and ``duration_s`` (injectable for tests).
        wait_for_slots: When other runs on this machine hold the slots needed: ``True`` waits in
            line (a message on stderr says the position, the holders and an estimate), ``False``
            raises ``SlotsBusyError`` naming them.
        device: ``"cpu"``, ``"gpu"`` or ``None`` (GPUs when there is one per worker, else CPU cores,
            the GPUs hidden from the ranks). Pass ``plan_workers().device`` so a lesson's baseline
            and its multi-worker runs use the same kind.
        oversubscribe: Allow more workers than the machine's slots (CPU only; the run then holds
            them all and its ranks take turns on them).
    """

    timeout: float | None
    env: Mapping[str, str] | None
    show: str
    output: Any
    check: bool
    python: str
    cwd: str | os.PathLike[str] | None
    stop_event: threading.Event | None
    on_event: Callable[[dict], None] | None
    grace_s: Sequence[float]
    clock: Callable[[], float]
    wait_for_slots: bool
    device: str | None
    oversubscribe: bool


OPTION_NAMES = frozenset(RunOptions.__annotations__)


@dataclass(frozen=True)
class Launch:
    """One launch: :class:`RunOptions` after checking, every default filled in, and what the launcher built.

    Attributes:
        python, timeout, ...: The checked :class:`RunOptions`.
        command: The argument list to start (``horovodrun``, ``mpirun``, ``torchrun`` or ``python``).
        launcher: What the errors call the run's launcher (``"horovodrun"``, ``"the group of 2 workers"``).
        tagged: Its lines carry rank prefixes (``[1]<stdout>:``) to parse; ``False``: one process, all rank 0.
        place: What the run holds on this machine (:func:`course_lib.runner.slots.plan_placement`); the
            shares reach the ranks as ``$COURSE_PLACEMENT`` (the command starts them through
            :data:`course_lib.runner.slots.RANK_WRAPPER`). ``None``: hold nothing (runs on other machines).
        script: What the slot files tell other launches about this run.
    """

    python: str
    timeout: float | None = None
    env: dict[str, str] | None = None
    show: str = "rank0"
    output: Any = None
    check: bool = True
    cwd: str | os.PathLike[str] | None = None
    stop_event: threading.Event | None = None
    on_event: Callable[[dict], None] | None = None
    grace_s: Sequence[float] = (3.0, 3.0)
    clock: Callable[[], float] = time.monotonic
    wait_for_slots: bool = True
    device: str | None = None
    oversubscribe: bool = False
    command: tuple[str, ...] = ()
    launcher: str = "python"
    tagged: bool = True
    place: PlaceRequest | None = None
    script: str = "?"

    @classmethod
    def of(cls, options: Mapping[str, Any], *, show: str = "rank0",
           timeout: float | None = None) -> "Launch":
        """Check ``options`` (a launcher's ``**options``) and fill in the defaults.

        Args:
            options: The keywords given.
            show, timeout: This launcher's defaults for ``show`` and ``timeout``.

        Raises:
            LaunchError: An unknown keyword (with the nearest known one), or a bad value (the
                message of the check that refused it).
        """
        unknown = sorted(set(options) - OPTION_NAMES)
        if unknown:
            near = difflib.get_close_matches(unknown[0], sorted(OPTION_NAMES), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise LaunchError(f"unknown keyword {unknown[0]!r}{hint} (the launchers take: "
                              f"{', '.join(sorted(OPTION_NAMES))})")
        values = {"show": show, "timeout": timeout, **options}
        exe = check_common(values["timeout"], values["show"], values.get("output"),
                           values.get("python", sys.executable))
        values["python"] = exe
        values["env"] = check_env(values.get("env"))
        return cls(**values)

    def but(self, **changes: Any) -> "Launch":
        """A copy with ``changes`` (an environment the launcher adds to, its command, what it holds)."""
        if "command" in changes:
            changes["command"] = tuple(changes["command"])
        return Launch(**{**self.__dict__, **changes})
