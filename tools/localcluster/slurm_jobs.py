"""Submit a batch job to a Slurm cluster and wait for it, with bounded loops and the scheduler's words.

:func:`submit` runs ``sbatch --parsable`` (a refused request, such as more tasks than the node has or
a missing script, raises :class:`SlurmJobError` with sbatch's own message). :func:`wait` polls
``scontrol show job`` until the job ends or ``timeout`` passes; a job PENDING for a reason that no
amount of waiting cures (``PartitionTimeLimit``: a ``--time`` above the partition's limit, and the
others in :data:`HOPELESS`) is cancelled and raised at once with that reason, instead of a hang.

Works with any Slurm whose commands find their controller through ``env`` (``SLURM_CONF`` for
:class:`tools.localcluster.slurm.LocalSlurm`).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from course_lib.runner.runlog import parse_line

__all__ = ["SlurmJobError", "JobOutcome", "submit", "wait", "job_fields", "HOPELESS", "DONE_STATES"]

#: Pending reasons that never clear by themselves (the job would wait forever).
HOPELESS = frozenset({"PartitionTimeLimit", "PartitionNodeLimit", "PartitionConfig", "ReqNodeNotAvail",
                      "BadConstraints", "InvalidAccount", "InvalidQOS", "AssocMaxWallDurationPerJobLimit",
                      "QOSMaxWallDurationPerJobLimit", "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved"
                      "_for_jobs_in_higher_priority_partitions", "NodeDown", "PartitionDown", "PartitionInactive"})
DONE_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                         "PREEMPTED", "BOOT_FAIL", "DEADLINE"})


class SlurmJobError(RuntimeError):
    """A request the scheduler refused, or a job that cannot run; the message is the scheduler's."""


@dataclass
class JobOutcome:
    """A finished job: its state, exit code, output and the JSON lines in it."""

    job_id: str
    state: str
    exit_code: str
    fields: dict[str, str]
    output: str
    seconds: float
    events: list[dict] = field(default_factory=list)


def _run(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float, cwd: str | Path | None = None):
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, env=dict(env) if env else None,
                              timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        raise SlurmJobError(f"{argv[0]} did not answer within {timeout:g} s: is slurmctld running?") from exc


def submit(script: str | Path, script_args: Sequence[str] = (), *, options: Sequence[str] = (),
           env: Mapping[str, str] | None = None, cwd: str | Path | None = None, timeout: float = 30) -> str:
    """``sbatch --parsable OPTIONS SCRIPT ARGS``; the job id.

    Raises:
        SlurmJobError: sbatch refused the job (its message: e.g. "Requested node configuration is not
            available", "Unable to open file"), or did not answer.
    """
    done = _run(["sbatch", "--parsable", *options, str(script), *script_args], env, timeout, cwd)
    if done.returncode != 0:
        raise SlurmJobError(f"sbatch refused the job: {(done.stderr or done.stdout).strip()}")
    job_id = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmJobError(f"sbatch printed no job id: {done.stdout!r} {done.stderr!r}")
    return job_id


def job_fields(job_id: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``scontrol show job -o ID`` as a dict (``{}`` when the controller no longer knows the job)."""
    done = _run(["scontrol", "show", "job", "-o", job_id], env, 15)
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return {}
        raise SlurmJobError(f"scontrol show job {job_id} failed: {done.stderr.strip()}")
    out: dict[str, str] = {}
    for part in done.stdout.split():
        key, sep, value = part.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


def wait(job_id: str, *, timeout: float, env: Mapping[str, str] | None = None, poll_s: float = 0.5,
         pending_grace_s: float = 3.0) -> JobOutcome:
    """Wait (at most ``timeout`` s) for ``job_id`` to end; read its output file and JSON lines.

    Args:
        pending_grace_s: How long a hopeless pending reason may last before the job is cancelled
            (the scheduler sets the final reason on its first pass).

    Raises:
        SlurmJobError: The job pends for a reason in :data:`HOPELESS` (cancelled; the reason is in
            the message), or ``timeout`` passed (cancelled; its last state and reason named).
    """
    start = time.monotonic()
    hopeless_since: float | None = None
    fields: dict[str, str] = {}
    while True:  # bounded by timeout
        fields = job_fields(job_id, env)
        state = fields.get("JobState", "")
        if state in DONE_STATES:
            break
        reason = fields.get("Reason", "")
        if state == "PENDING" and reason in HOPELESS:
            hopeless_since = hopeless_since if hopeless_since is not None else time.monotonic()
            if time.monotonic() - hopeless_since >= pending_grace_s:
                _run(["scancel", job_id], env, 15)
                raise SlurmJobError(
                    f"job {job_id} cannot start: PENDING with Reason={reason} (TimeLimit="
                    f"{fields.get('TimeLimit')}, partition {fields.get('Partition')}); it would wait "
                    f"forever, so it was cancelled. {_advice(reason)}")
        else:
            hopeless_since = None
        sick = _sick_nodes(fields.get("NodeList", ""), env) if state in ("RUNNING", "COMPLETING", "CONFIGURING") else []
        if sick:
            _run(["scancel", job_id], env, 15)
            raise SlurmJobError(
                f"job {job_id} ({state}) lost its node: {'; '.join(sick)}. The node's slurmd is stopped or "
                "unreachable: start slurmd on it (or `scontrol update nodename=... state=resume` once it is "
                "back); the job was cancelled")
        if time.monotonic() - start > timeout:
            _run(["scancel", job_id], env, 15)
            raise SlurmJobError(f"job {job_id} did not end within {timeout:g} s (last state {state or '?'}, "
                                f"reason {reason or '?'}); it was cancelled")
        time.sleep(poll_s)
    output_path = fields.get("StdOut", "")
    output = Path(output_path).read_text(errors="replace") if output_path and Path(output_path).is_file() else ""
    # A task's line carries horovodrun's rank prefix, or none (srun): parsed as the launcher's are.
    events = [event for line in output.splitlines()
              if (event := parse_line(line)[3] or parse_line(line, horovod=False)[3]) is not None]
    return JobOutcome(job_id, fields.get("JobState", ""), fields.get("ExitCode", ""), fields, output,
                      time.monotonic() - start, events)


def _sick_nodes(nodelist: str, env: Mapping[str, str] | None) -> list[str]:
    """``"vm: State=MIXED+NOT_RESPONDING Reason=..."`` for each node of ``nodelist`` that is down or not responding."""
    if not nodelist or nodelist == "(null)":
        return []
    done = _run(["scontrol", "show", "node", "-o", nodelist], env, 15)
    out = []
    for line in done.stdout.splitlines():
        fields = dict(part.partition("=")[::2] for part in line.split() if "=" in part)
        state = fields.get("State", "")
        if "NOT_RESPONDING" in state or state.startswith("DOWN"):
            reason = line.split("Reason=", 1)[1].strip() if "Reason=" in line else "none given"
            out.append(f"{fields.get('NodeName', '?')}: State={state} Reason={reason}")
    return out


def _advice(reason: str) -> str:
    if reason == "PartitionTimeLimit":
        return "Ask for a --time within the partition's MaxTime (sinfo shows TIMELIMIT)."
    if reason == "PartitionConfig":
        return ("The request asks for more than the partition's nodes have (tasks x cpus-per-task against "
                "each node's CPUs: `sinfo -N -o '%N %c'`); ask for fewer tasks or CPUs.")
    if reason.startswith("PartitionNode") or reason == "ReqNodeNotAvail":
        return "Ask for fewer nodes, or the nodes the partition has (sinfo)."
    return "See `scontrol show job` and `sinfo` for what the partition offers."
