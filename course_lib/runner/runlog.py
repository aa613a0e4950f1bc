"""The log of a launched run: rank prefixes parsed, JSON lines collected into a ``RunResult``.

Every line a launch prints is parsed here, and only here. Horovod prefixes every line of a rank (and
``torchrun --tee 3`` does: ``[default1]:text``, notebook 07). Gloo (``horovodrun --gloo``) writes ``[1]<stderr>:text``
(optionally preceded by a timestamp with ``--prefix-output-with-timestamp``); Open MPI
(``--mpi``, which tags output) writes ``[1,0]<stdout>:text`` where the second number is the
rank (and may cut a line in two: :class:`TagJoiner` joins it). Lines without a prefix are horovodrun's /
mpirun's own. A rank's text that is one JSON object with an ``"event"`` key is an event of
``docs/architecture.md``.

Introduced in notebooks/03_horovod.ipynb.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

__all__ = ["RunResult", "TagJoiner", "parse_line", "names_stream", "split_interleaved"]

_ASCTIME = r"(?:\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})?"  # optional (Gloo's --prefix-output-with-timestamp)
_STREAMS = r"stdout|stderr|stddiag"
_PREFIX = re.compile(
    rf"^{_ASCTIME}\[(?:(?P<job>\d+),)?(?P<rank>\d+)\]<(?P<stream>{_STREAMS})>:(?P<text>.*)$"
)
#: torchrun's prefix (``--tee 3``): ``[default1]:text``, the role (``default``) and the local rank; the stream is
#: the pipe the line came through (a rank's stderr stays torchrun's stderr). One machine: local rank = rank.
_TORCHRUN_PREFIX = re.compile(r"^\[(?P<role>[A-Za-z_][A-Za-z_-]*?)(?P<rank>\d+)\]:(?P<text>.*)$")
_PREFIX_AFTER_CR = re.compile(rf"\r{_ASCTIME}\[(?:\d+,)?\d+\]<(?:{_STREAMS})>:")
#: A "\r" followed by a Gloo rank prefix (lookahead: the prefix stays with the piece it starts).
_GLOO_TAG_AFTER_CR = re.compile(rf"\r(?={_ASCTIME}\[(\d+)\]<({_STREAMS})>:)")
# horovodrun's own report of a failed rank (Gloo) and mpirun's (MPI).
_RUNNER_FAILED = re.compile(r"^\s*Process name:\s*(?:(\d+)|\[\[\d+,\d+\],(\d+)\])\s*$")
_COLLATERAL = "Horovod has been shut down"
_TRACEBACK = "Traceback (most recent call last)"
#: Open MPI's ``--tag-output`` prefix, ``[jobid,rank]<stdout>:``.
_MPI_TAG = re.compile(rf"\[\d+,\d+\]<(?:{_STREAMS})>:")


class TagJoiner:
    """Re-joins the lines that ``mpirun --tag-output`` cut apart.

    An unbuffered Python rank (``PYTHONUNBUFFERED=1``) writes ``print(text)`` as two writes, the
    text and then the newline; mpirun tags each piece it reads, so another rank's line can land
    between them: ``[1,0]<stdout>:AAA[1,1]<stdout>:BBB`` and later ``[1,0]<stdout>:`` (the newline).
    A tagged piece that is followed by another tag on the same line is unfinished: it is kept and
    put in front of that rank's next piece. Lines with one tag at their start pass unchanged.

    Introduced in notebooks/06_beyond_one_machine.ipynb.
    """

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}

    def feed(self, line: str) -> list[str]:
        """The complete lines that ``line`` finishes (none, one or several)."""
        tags = list(_MPI_TAG.finditer(line))
        if not tags or (len(tags) == 1 and tags[0].start() == 0 and not self.pending):
            return [line]
        out = [line[:tags[0].start()]] if tags[0].start() > 0 else []
        for k, match in enumerate(tags):
            tag = match.group()
            if k + 1 < len(tags):  # unfinished: another rank's piece follows on this line
                self.pending[tag] = self.pending.get(tag, "") + line[match.end():tags[k + 1].start()]
            else:
                out.append(tag + self.pending.pop(tag, "") + line[match.end():])
        return out

    def flush(self) -> list[str]:
        """What is still unfinished when the output ends, one line per rank."""
        rest = [tag + text for tag, text in self.pending.items()]
        self.pending.clear()
        return rest


def split_interleaved(line: str) -> list[str]:
    """Cut a line where another rank's whole line landed after a carriage return.

    A rank behind a pseudo-terminal (``ssh -tt``) ends its lines in ``"\\r\\n"``; horovodrun
    writes ``[1]<stdout>:text\\r`` and ``[1]<stdout>:`` (the newline) as two writes, and another
    rank's line can land between them: ``[1]<stdout>:text\\r[0]<stdout>:epoch 3 ...``. Read as one
    line, rank 0's line would be lost inside rank 1's (seen in notebook 06's two-host run). A
    prefix after a ``"\\r"`` that names another rank or stream starts a line of its own; the same
    rank's prefix stays (a progress bar that :func:`parse_line` reduces to its last state).

    Returns:
        The line's pieces, in order (the line itself when nothing is interleaved).
    """
    first = _PREFIX.match(line)
    if first is None or first["job"] is not None:
        return [line]
    owner, pieces, start = (first["rank"], first["stream"]), [], 0
    for match in _GLOO_TAG_AFTER_CR.finditer(line):
        if (match[1], match[2]) != owner:
            pieces.append(line[start:match.end()])
            start, owner = match.end(), (match[1], match[2])
    return [*pieces, line[start:]]


def names_stream(line: str) -> bool:
    """True when the line's prefix names its stream (Horovod's and mpirun's do; torchrun's does not: its
    lines' stream is the pipe they came through)."""
    return _PREFIX.match(line) is not None


def parse_line(line: str, *, horovod: bool = True) -> tuple[int | None, str, str, dict | None]:
    """Split one output line into rank, stream, text and (if any) JSON event.

    Args:
        line: A line as written by horovodrun (or by a single python process).
        horovod: ``False`` for a single process: every line is rank 0's stdout.

    Returns:
        ``(rank, stream, text, event)``: ``rank`` is ``None`` for horovodrun's own lines; text
        is what follows the prefix, reduced to what a terminal shows after a carriage return;
        ``event`` is the JSON dict when the text is a JSON event, else ``None``.
    """
    rank: int | None = 0
    stream, text = "stdout", line
    if horovod:
        match = _PREFIX.match(line)
        if match:
            rank, stream, text = int(match["rank"]), match["stream"], match["text"]
            if match["job"] is not None:  # mpirun may repeat the tag inside a split line
                text = text.replace(line[: match.start("text")], "")
        elif (torchrun := _TORCHRUN_PREFIX.match(line)) is not None:
            rank, text = int(torchrun["rank"]), torchrun["text"]
        else:
            rank = None
    # A rank behind a pseudo-terminal (ssh -tt: lines end in "\r\n") reaches horovodrun as
    # 'text\r' and comes out as '[1]<stdout>:text\r[1]<stdout>:' (the prefix repeated after the "\r").
    # Drop a prefix that follows a "\r", then one trailing "\r": only a carriage return INSIDE the
    # text means a terminal overwrote what came before it (a progress bar).
    text = _PREFIX_AFTER_CR.sub("\r", text)
    if text.endswith("\r"):
        text = text[:-1]
    text = text.rsplit("\r", 1)[-1]
    event = None
    stripped = text.strip()
    if rank is not None and stripped.startswith("{") and stripped.endswith("}"):
        try:
            candidate = json.loads(stripped)
        except ValueError:
            candidate = None
        if isinstance(candidate, dict) and isinstance(candidate.get("event"), str):
            event = candidate
    return rank, stream, text, event


@dataclass
class RunResult:
    """Everything a run printed, and the JSON records of ``docs/architecture.md``.

    Attributes:
        command: The argument list that was run.
        returncode: Exit status (``None`` while running).
        duration_s: Wall-clock seconds of the run, clean-up included.
        config: The ``config`` event (rank 0), or ``None``.
        epochs: The ``epoch`` events of rank 0, in order.
        result: The ``result`` event (rank 0), or ``None``.
        digests: ``{rank: digest}`` from the ``digest`` events.
        checkpoints: The ``checkpoint`` events, in order.
        log: Every line, as printed (rank prefixes included).
        events: Every JSON event with the rank that printed it, ``[(rank, event), ...]``.
        pids: Every process id of the run (the launcher and its descendants).
        placement: Each rank slot's granted core ids (or GPU indices), in rank order; ``[]`` when the
            run held no slots (hosts elsewhere).
    """

    command: list[str]
    returncode: int | None = None
    duration_s: float = 0.0
    config: dict | None = None
    epochs: list[dict] = field(default_factory=list)
    result: dict | None = None
    digests: dict[int, str] = field(default_factory=dict)
    checkpoints: list[dict] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    events: list[tuple[int, dict]] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    placement: list[list[int]] = field(default_factory=list)
    _parsed: list[tuple[int | None, str, str]] = field(default_factory=list, repr=False)

    def add_line(self, line: str, rank: int | None, stream: str, text: str,
                 event: dict | None) -> None:
        """Record one line (see :func:`parse_line` for the other arguments)."""
        self.log.append(line)
        self._parsed.append((rank, stream, text))
        if event is None or rank is None:
            return
        self.events.append((rank, event))
        kind = event["event"]
        if kind == "digest":
            self.digests[int(event.get("rank", rank))] = str(event.get("digest"))
        elif rank != 0:
            return
        elif kind == "config":
            self.config = event
        elif kind == "epoch":
            self.epochs.append(event)
        elif kind == "result":
            self.result = event
        elif kind == "checkpoint":
            self.checkpoints.append(event)

    def command_line(self) -> str:
        """The command that ran, as one line to read: each absolute path shortened to its file name
        (``/…/.venv/bin/python`` → ``python``), so the line is the same on every machine.

        Introduced in notebooks/03_horovod.ipynb (which prints the ``horovodrun`` line of each launch).
        """
        return " ".join(os.path.basename(arg) if os.path.isabs(arg) else arg for arg in self.command)

    def lines_for_rank(self, rank: int | None) -> list[str]:
        """The text (prefix removed) of every line of ``rank``; ``None``: horovodrun's own."""
        return [text for r, _, text in self._parsed if r == rank]

    def failed_rank(self) -> int | None:
        """The rank that failed first, or ``None`` if it cannot be told.

        Ranks' lines reach the log in no reliable order, so the guess is: the first rank with a
        traceback that is not just the echo of another rank's failure ("Horovod has been shut
        down"); else the rank horovodrun / mpirun names as the first to exit non-zero; else
        the first rank with a traceback.
        """
        tracebacks: list[int] = []
        collateral: set[int] = set()
        named: int | None = None
        for rank, _, text in self._parsed:
            if rank is None:
                match = _RUNNER_FAILED.search(text)
                if match and named is None:
                    named = int(match.group(1) or match.group(2))
            elif _TRACEBACK in text and rank not in tracebacks:
                tracebacks.append(rank)
            elif _COLLATERAL in text:
                collateral.add(rank)
        for rank in tracebacks:
            if rank not in collateral:
                return rank
        return named if named is not None else (tracebacks[0] if tracebacks else None)

    def failure_tail(self, lines: int = 15) -> tuple[int | None, str]:
        """``(rank, tail)``: the failing rank and its last ``lines`` lines (or the log's)."""
        rank = self.failed_rank()
        source = self.lines_for_rank(rank) if rank is not None else self.log
        return rank, "\n".join(source[-lines:])
