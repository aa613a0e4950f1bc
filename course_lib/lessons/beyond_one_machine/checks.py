"""Self-checks of notebook 06's exercises (the Slurm batch script, an elastic job's host discovery), and its summary.

* :func:`check_slurm_hosts` (``06.slurm_hosts``): runs the real ``cluster/slurm_horovod.sbatch`` against stub
  ``scontrol`` and ``horovodrun`` programs (:func:`run_batch_script`) and compares with what it launched;
* :func:`check_discovery_script` (``06.discovery``, a coding exercise): runs the learner's host discovery script
  in made-up cluster states and compares its lines with the hosts each state allows.

No answer is stored: each is read from a run. Each check prints and returns its verdict the one way
:mod:`course_lib.lessons.common.checks` defines. :func:`summary` writes the summary's sentences about what the
notebook's runs showed from their verdicts, so a sentence cannot claim what its run did not show.

Introduced in notebooks/06_beyond_one_machine.ipynb.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping

from course_lib.lessons.common.checks import right, waiting, wrong

__all__ = ["expand_nodelist", "run_batch_script", "check_slurm_hosts",
           "DISCOVERY_CASES", "check_discovery_script", "summary"]


def expand_nodelist(nodelist: str) -> list[str]:
    """``"gpu[1-3],login"`` -> ``["gpu1", "gpu2", "gpu3", "login"]`` (what ``scontrol show hostnames`` prints;
    one bracket per name, ranges and commas inside it, leading zeros kept)."""
    names = []
    for match in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist):
        prefix, ranges = match.group(1), match.group(2)
        if ranges is None:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            first, _, last = part.partition("-")
            width = len(first)
            for number in range(int(first), int(last or first) + 1):
                names.append(f"{prefix}{number:0{width}d}")
    return names


def run_batch_script(script: str | os.PathLike[str], slurm: Mapping[str, str]) -> list[str]:
    """Run ``cluster/slurm_horovod.sbatch`` with ``LAUNCHER=horovodrun`` and the ``SLURM_*`` values of ``slurm``
    against stubs, and return the arguments it gave ``horovodrun``.

    Raises:
        RuntimeError: The script failed (its last line of stderr is in the message).
    """
    with tempfile.TemporaryDirectory(prefix="sbatch_") as folder:
        stubs = Path(folder)
        (stubs / "bin").mkdir()
        hosts = "\n".join(expand_nodelist(slurm.get("SLURM_JOB_NODELIST", "")))
        (stubs / "scontrol").write_text(f"#!/bin/bash\ncat <<'EOF'\n{hosts}\nEOF\n")
        (stubs / "bin" / "horovodrun").write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$0.args"\n')
        for path in (stubs / "scontrol", stubs / "bin" / "horovodrun"):
            path.chmod(0o755)
        env = {**os.environ, **slurm, "PATH": f"{stubs}:{os.environ['PATH']}", "LAUNCHER": "horovodrun",
               "COURSE_VENV": str(stubs)}
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"the batch script failed: {(done.stderr.strip().splitlines() or [''])[-1]}")
        return (stubs / "bin" / "horovodrun.args").read_text().split()


def check_slurm_hosts(answer: Any, script: str | os.PathLike[str]) -> bool:
    """Self-check ``06.slurm_hosts``: the ``-H`` list the batch script builds for ``gpu[1-3]``, 4 tasks per node."""
    key = "06.slurm_hosts"
    if answer is None:
        return waiting(key)
    args = run_batch_script(script, {"SLURM_JOB_NODELIST": "gpu[1-3]", "SLURM_NTASKS_PER_NODE": "4"})
    if str(answer).replace(" ", "") != args[args.index("-H") + 1]:
        return wrong(key, f"{answer!r} is not the host list the script built.",
                     "read the loop that builds HOSTS: which names does scontrol print, and how many slots each")
    return right(key, "that is the -H list the batch script passed to horovodrun")


#: ``06.discovery``: (nodes file lines, slots per node, drained file lines or None for no file).
DISCOVERY_CASES: list[tuple[list[str], int, list[str] | None]] = [
    (["gpu1", "gpu2", "gpu3"], 4, None),
    (["node01", "node02", "node03", "node04"], 2, ["node02"]),
    (["gpu1", "gpu10", "gpu11"], 8, ["gpu10"]),
    (["a", "b"], 1, []),
]


def _expected_hosts(nodes: list[str], slots: int, drained: list[str] | None) -> list[str]:
    return [f"{node}:{slots}" for node in nodes if node not in (drained or [])]


def _diagnose_discovery(got: list[str], nodes: list[str], slots: int, drained: list[str] | None) -> str:
    if any("slots=" in line or " " in line.strip() for line in got):
        return "horovodrun reads host:slots lines, not a hostfile's 'host slots=N'"
    if len(got) == 1 and "," in got[0]:
        return "print one host:slots per line"
    if drained and got == [f"{node}:{slots}" for node in nodes]:
        return "a drained node must not be offered: read the file DRAINED_FILE names"
    if any(line.rpartition(":")[2] != str(slots) for line in got):
        return "read the slots from SLOTS_PER_NODE, do not write a number in"
    return "a drained node's name must match a whole line of DRAINED_FILE: does draining gpu10 also drain gpu1?"


def check_discovery_script(script: str | None) -> bool:
    """Self-check ``06.discovery``: run the learner's host discovery script (its text) in made-up cluster states.

    Each state of :data:`DISCOVERY_CASES` gives the script ``NODES_FILE`` (the job's nodes, one per line),
    ``SLOTS_PER_NODE`` and ``DRAINED_FILE`` (nodes being drained; the file may not exist); the script must print
    one ``host:slots`` line per node that is not drained, as ``horovodrun --host-discovery-script`` reads them.

    Args:
        script: The script's text (it starts with ``#!/bin/bash``); ``None`` or the placeholder: not written yet.
    """
    key = "06.discovery"
    if script is None or "# your lines here" in script:
        return waiting(key, "not written yet", "write your lines in DISCOVERY in the cell above and run both cells.")
    with tempfile.TemporaryDirectory(prefix="discovery_") as folder:
        work = Path(folder)
        path = work / "discover.sh"
        path.write_text(script)
        path.chmod(0o755)
        for nodes, slots, drained in DISCOVERY_CASES:
            (work / "nodes").write_text("".join(f"{n}\n" for n in nodes))
            (work / "drained").unlink(missing_ok=True)
            if drained is not None:
                (work / "drained").write_text("".join(f"{n}\n" for n in drained))
            env = {**os.environ, "NODES_FILE": str(work / "nodes"), "SLOTS_PER_NODE": str(slots),
                   "DRAINED_FILE": str(work / "drained")}
            try:
                done = subprocess.run([str(path)], env=env, cwd=work, capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return wrong(key, f"your script did not run: {type(exc).__name__}.",
                             "start it with #!/bin/bash and let it end within a second")
            state = (f"nodes {', '.join(nodes)}, {slots} slots each, "
                     + ("no drain file" if drained is None else f"drained: {', '.join(drained) or 'none'}"))
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or [""])[-1][:200]
                return wrong(key, f"with {state} your script exited with status {done.returncode} ({last}).",
                             "the drain file may be missing or empty; horovodrun treats a failing script as no hosts")
            got = [line.strip() for line in done.stdout.splitlines() if line.strip()]
            if got != _expected_hosts(nodes, slots, drained):
                return wrong(key, f"with {state} your script printed {got}.",
                             _diagnose_discovery(got, nodes, slots, drained))
    return right(key, f"your script offers the right hosts in all {len(DISCOVERY_CASES)} cluster states")


def summary(verdicts: Mapping[str, Any]) -> str:
    """The sentences of notebook 06's summary that state what its runs showed, each from its verdict.

    Args:
        verdicts: ``"same weights"`` (the two-host and the ``mpirun`` run ended identical), ``"elastic"`` (the
            elastic job shrank, grew back and reached its last epoch), ``"lr ratio"`` (its learning rate with 2
            workers over the rate with 1), ``"mwms resumed"`` (the killed MWMS run, restarted, ended with the
            uninterrupted run's weights).

    Returns:
        One ``- `` line per verdict.
    """
    ratio = float(verdicts["lr ratio"])
    if math.isclose(ratio, math.sqrt(2), rel_tol=1e-4):
        how = f"divided by {ratio:.4f}, which is √2 (not halved: the rate scales with √workers)"
    elif math.isclose(ratio, 2.0, rel_tol=1e-4):
        how = "halved (the rate scales linearly with the workers)"
    else:
        how = f"divided by {ratio:.4f}"
    lines = [
        "Two \"hosts\" (localhost, 127.0.0.1) and plain mpirun -np 2 trained to identical weights."
        if verdicts["same weights"] else
        "The two-host run and the mpirun run did NOT end with identical weights: compare their digests above.",
        "The elastic job shrank to one worker when a worker was killed mid-epoch, resumed from its last commit, "
        "grew back after the host's cool-down and reached its final epoch."
        if verdicts["elastic"] else
        "The elastic job did NOT go through shrink, regrowth and its final epoch: read section 2's verdicts.",
        f"When the elastic group shrank from 2 workers to 1, its learning rate was {how}.",
        "MultiWorkerMirroredStrategy's killed run, started again with BackupAndRestore, ended with the weights of "
        "the uninterrupted run." if verdicts["mwms resumed"] else
        "MultiWorkerMirroredStrategy's restarted run did NOT end with the uninterrupted run's weights.",
    ]
    return "\n".join(f"- {line}" for line in lines)
