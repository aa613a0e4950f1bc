"""``make bench``: measure the course's own performance claims, side by side, in one run.

Writes ``benchmarks/results/<date>-<host>.json`` and ``.md`` (atomically) and prints the table.
Sections (``--only``): 1 Horovod CPU scaling vs 1 worker, vs its bound and beside one process on every core,
1x Horovod settings explored (opt-in), 2 MirroredStrategy 1 vs 2 simulated devices,
3 Horovod vs MirroredStrategy at equal global batch, 4 Throughput callback overhead,
5 input pipeline vs model, 6 throughput vs batch size, 7 notebook suite wall time,
8 GPU float32 vs mixed precision, 10 all-reduce micro-benchmark (notebook 05). See
benchmarks/README.md.

Every launched variant is one fresh process (group); the variants of sections 1, 1x, 2, 3 and 8
run interleaved (A, B, C, A, B, C, ...), sections 4–6 interleave inside one process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import allreduce, report, rounds, stats, step_cost  # noqa: E402
from benchmarks.stats import BenchOptionError, Row  # noqa: E402
from course_lib.environment import machine  # noqa: E402

SECTIONS = ("1", "1x", "1h", "1s", "1f", "2", "3", "4", "5", "6", "7", "8", "10", "10s")
DEFAULT_SECTIONS = ("1", "2", "3", "4", "5", "6", "7", "8", "10")
WORKLOADS = REPO / "benchmarks" / "workloads"
TRAIN = WORKLOADS / "train_throughput.py"
IDLE = WORKLOADS / "hvd_idle_cpu.py"
IN_PROCESS = WORKLOADS / "in_process.py"
WORKERS = 2
BATCH = 128
#: A candidate environment for the course's Horovod runs on CPU, measured against Horovod's defaults.
#: Chosen from section 1x; see benchmarks/README.md ("What was changed").
COURSE_HOROVOD_ENV: dict[str, str] = {"HOROVOD_CYCLE_TIME": "5"}
#: Re-runs allowed for rounds the CPU clock judged disturbed (benchmarks/rounds.py), per group.
MAX_EXTRA_ROUNDS = 2
#: Section 1h's headline, declared before it runs (issue 52): this variant over the bound, at least this many rounds.
HEADLINE = {"section": "1h", "variant": "h_course", "over": "bound", "rounds": 8}
#: Pace probes (course_lib.environment.machine.speed_probe, seconds) taken before each launch of this run.
PACE: list[dict] = []


@dataclass
class Settings:
    """How long and how often to measure."""

    repeats: int
    warmup_steps: int
    steps: int
    inproc_steps: int
    images: int
    quick: bool
    timeout_s: float = 600.0
    max_extra_rounds: int = 0
    callback_rounds: int = 8      # section 4: rounds of fit with / without the callback, alternated A B B A
    callback_steps: int = 120     # section 4: steps of each timed fit (the noise of a fit falls with its length)
    allreduce_rounds: int = 3     # section 10: rounds of [probe, each Horovod setting], the order reversed each round
    allreduce_repeats: int = 10   # section 10: timed calls per size and launch


def make_settings(quick: bool, repeats: int | None) -> Settings:
    """Full (``make bench``) or ``--quick`` settings, with ``--repeats`` applied.

    Raises:
        BenchOptionError: ``repeats`` is not an int >= 1.
    """
    if quick:
        settings = Settings(repeats=2, warmup_steps=3, steps=12, inproc_steps=8, images=1024,
                            quick=True, callback_rounds=2, callback_steps=8, allreduce_rounds=1,
                            allreduce_repeats=3)
    else:
        settings = Settings(repeats=5, warmup_steps=8, steps=60, inproc_steps=40, images=5120,
                            quick=False)
    if repeats is not None:
        settings.repeats = stats.check_repeats(repeats)
        settings.callback_rounds = max(settings.callback_rounds, settings.repeats)
    # Disturbed rounds are re-run, at most MAX_EXTRA_ROUNDS in all per group of rounds: on a
    # quiet machine few are, and make bench must stay within 20 minutes.
    settings.max_extra_rounds = 0 if quick else min(MAX_EXTRA_ROUNDS, settings.repeats)
    return settings


@dataclass
class Variant:
    """One thing to launch and time."""

    name: str
    label: str
    launcher: str  # "horovod", "python" or "bound" (N one-worker copies at once: course_lib.runner.multiworker.run_bound)
    args: list[str]
    workers: int = 1
    env: dict[str, str] = field(default_factory=dict)
    controller: str = "gloo"
    script: Path = TRAIN  # IDLE: % of a core Horovod takes while idle, mean over ranks
    horovodrun_args: list[str] = field(default_factory=list)
    python: str | None = None  # another venv's interpreter (section 1s); None: this one
    slots: int = 0  # launcher "python": slots the process holds and runs on (0: every core, as one process needs)


def _train_args(settings: Settings, *extra: str, batch: int = BATCH) -> list[str]:
    return ["--batch", str(batch), "--warmup-steps", str(settings.warmup_steps),
            "--steps", str(settings.steps), *extra]


def launch_variants(sections: list[str], settings: Settings, cores: int,
                    gpus: list[str]) -> list[Variant]:
    """The launched variants the chosen sections need (each once, in a fixed order)."""
    wanted: list[str] = []
    if "1" in sections:
        wanted += ["hvd1", "hvd2", "hvd2_course", "hvd2_mpi", "bound", "one_process", "hvd2_unpinned"]
    if "2" in sections:
        wanted += ["mir1", "mir2"]
    if "3" in sections:
        wanted += ["hvd2", "hvd2_course", "mir2"]
    hvd = ["--mode", "horovod"]
    table = {
        "hvd1": Variant("hvd1", report.LABELS["hvd1"], "horovod",
                        _train_args(settings, *hvd, "--threads", "1"), 1),
        "hvd2": Variant("hvd2", report.LABELS["hvd2"], "horovod",
                        _train_args(settings, *hvd, "--threads", "1"), WORKERS),
        # The course's CPU default, as source_code/horovod_fmnist.py runs: one core per rank (section 1h).
        "hvd2_course": Variant("hvd2_course", report.LABELS["hvd2_course"], "horovod",
                               _train_args(settings, *hvd, "--threads", "1", "--pin-core"), WORKERS,
                               dict(COURSE_HOROVOD_ENV)),
        # The setting notebook 05 and section 10 measure as the faster all-reduce on one machine: MPI.
        "hvd2_mpi": Variant("hvd2_mpi", report.LABELS["hvd2_mpi"], "horovod",
                            _train_args(settings, *hvd, "--threads", "1", "--pin-core"), WORKERS,
                            dict(COURSE_HOROVOD_ENV), controller="mpi"),
        "bound": bound_variant(settings),
        # The same global batch as -np 2 (2 x 128): batch size alone changes images/s (notebook 01).
        "one_process": Variant("one_process", report.LABELS["one_process"], "python",
                               _train_args(settings, "--mode", "single", "--threads", str(cores),
                                           batch=BATCH * WORKERS)),
        "hvd2_unpinned": Variant("hvd2_unpinned", report.LABELS["hvd2_unpinned"], "horovod",
                                 _train_args(settings, *hvd), WORKERS),
        "mir1": Variant("mir1", report.LABELS["mir1"], "python",
                        _train_args(settings, "--mode", "mirrored", "--devices", "1")),
        "mir2": Variant("mir2", report.LABELS["mir2"], "python",
                        _train_args(settings, "--mode", "mirrored", "--devices", "2")),
    }
    if "8" in sections and gpus:
        table["fp32"] = Variant("fp32", "1 GPU float32", "python",
                                _train_args(settings, "--mode", "single"), slots=1)
        table["mixed"] = Variant("mixed", "1 GPU mixed_float16", "python",
                                 _train_args(settings, "--mode", "single", "--mixed-precision"), slots=1)
        wanted += ["fp32", "mixed"]
    return [table[name] for name in dict.fromkeys(wanted)]


def bound_variant(settings: Settings) -> Variant:
    """The bound of the ``-np 2`` variants: 2 copies of the one-worker workload at once (``--mode single``, 1
    thread), each on the core a rank gets (the launcher's grant), never communicating."""
    return Variant("bound", report.LABELS["bound"], "bound", _train_args(settings, "--mode", "single", "--threads", "1"),
                   WORKERS)


def tuning_variants(settings: Settings) -> list[Variant]:
    """Section 1x: Horovod -np 2 (1 thread each) under different settings."""
    base = _train_args(settings, "--mode", "horovod", "--threads", "1")
    return [
        Variant("x_defaults", "gloo, Horovod defaults", "horovod", base, WORKERS),
        Variant("x_cycle5", "HOROVOD_CYCLE_TIME=5 ms", "horovod", base, WORKERS,
                {"HOROVOD_CYCLE_TIME": "5"}),
        Variant("x_cycle20", "HOROVOD_CYCLE_TIME=20 ms", "horovod", base, WORKERS,
                {"HOROVOD_CYCLE_TIME": "20"}),
        Variant("x_nofusion", "HOROVOD_FUSION_THRESHOLD=0 (no fusion)", "horovod", base, WORKERS,
                {"HOROVOD_FUSION_THRESHOLD": "0"}),
        Variant("x_datathreads1", "tf.data private pool of 1 thread", "horovod",
                base + ["--data-threads", "1"], WORKERS),
        Variant("x_mpi", "MPI controller (--mpi)", "horovod", base, WORKERS, controller="mpi"),
    ]


def gap_variants(settings: Settings, cores: int) -> list[Variant]:
    """Section 1h (opt-in): candidates to close Horovod's gap to its bound on CPU (issues 19, 46 and 52), each
    ``-np 2`` with 1 thread and 1 core per rank (the course default, ``--pin-core``), against the bound: the
    course's cycle time (5 ms) and Horovod's own (1 ms), on Gloo and on MPI. Section 10 measured what the cycle
    time costs one small all-reduce (alpha 4.9 ms at 5 ms, 1.0 ms at 1 ms, MPI); this section asks whether a step
    of training shows it. Earlier candidates (not pinned, inter-op threads 2, fp16 compression, a 20 ms cycle,
    MPI's bind-to-core) were measured in results/2026-11-21-vm-horovod.md and left out here."""
    base = _train_args(settings, "--mode", "horovod", "--threads", "1", "--pin-core")
    env = dict(COURSE_HOROVOD_ENV)
    one_ms = {**env, "HOROVOD_CYCLE_TIME": "1"}
    return [
        bound_variant(settings),
        Variant("h_course", "1 core each, gloo, HOROVOD_CYCLE_TIME=5 (course default)", "horovod", base, WORKERS,
                env),
        Variant("h_cycle1", "1 core each, gloo, HOROVOD_CYCLE_TIME=1", "horovod", base, WORKERS, one_ms),
        Variant("h_mpi", "1 core each, MPI, HOROVOD_CYCLE_TIME=5", "horovod", base, WORKERS, env,
                controller="mpi"),
        Variant("h_mpi_cycle1", "1 core each, MPI, HOROVOD_CYCLE_TIME=1", "horovod", base, WORKERS, one_ms,
                controller="mpi"),
    ]


def stack_variants(settings: Settings, cores: int, other_python: str) -> list[Variant]:
    """Section 1s (opt-in, issue 34): section 1's one-process run, 1 worker and the course's ``-np 2`` on this
    venv's stack and on another venv's (``--other-python``, e.g. the old TensorFlow 2.15.1 stack),
    interleaved, so that the two stacks' rates are compared round by round."""
    hvd = ["--mode", "horovod", "--threads", "1"]
    ours = [
        Variant("one_process", report.LABELS["one_process"], "python",
                _train_args(settings, "--mode", "single", "--threads", str(cores), batch=BATCH * WORKERS)),
        Variant("hvd1", report.LABELS["hvd1"], "horovod", _train_args(settings, *hvd), 1),
        Variant("hvd2_course", report.LABELS["hvd2_course"], "horovod",
                _train_args(settings, *hvd, "--pin-core"), WORKERS, dict(COURSE_HOROVOD_ENV)),
    ]
    # The other venv imports this checkout's course_lib (it need not be installed there).
    theirs = [Variant(f"other_{v.name}", f"{v.label} [other stack]", v.launcher, v.args, v.workers,
                      {**v.env, "PYTHONPATH": str(REPO)}, python=other_python) for v in ours]
    return [x for pair in zip(ours, theirs) for x in pair]


def idle_variants() -> list[Variant]:
    """Section 1x: CPU share of Horovod's background thread while idle, per setting."""
    args = ["--seconds", "5"]
    return [
        Variant("i_defaults", "idle Horovod CPU, gloo, cycle 1 ms (default)", "horovod", args,
                WORKERS, script=IDLE),
        Variant("i_cycle5", "idle Horovod CPU, gloo, HOROVOD_CYCLE_TIME=5", "horovod", args,
                WORKERS, {"HOROVOD_CYCLE_TIME": "5"}, script=IDLE),
        Variant("i_cycle20", "idle Horovod CPU, gloo, HOROVOD_CYCLE_TIME=20", "horovod", args,
                WORKERS, {"HOROVOD_CYCLE_TIME": "20"}, script=IDLE),
        Variant("i_mpi", "idle Horovod CPU, MPI controller", "horovod", args, WORKERS,
                controller="mpi", script=IDLE),
    ]


def _printer(line: str) -> None:
    print(f"    {line}", flush=True)


def run_variant(variant: Variant, data_path: Path, timeout_s: float) -> rounds.Measurement:
    """Launch one variant and return its figure (NaN, with the error printed, if it failed)
    and rank 0's CPU-clock window (None for the idle workload or a failed run).

    The figure is images/s (rank 0's ``result`` line) for the training workload, and the mean
    over ranks of the idle CPU share, in % of one core, for the idle workload.
    """
    from course_lib.runner import launch

    idle = variant.script == IDLE
    args = variant.args + ([] if idle else ["--data", str(data_path)])
    env = {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"), **variant.env}
    other = {"python": variant.python} if variant.python else {}
    PACE.append({"variant": variant.name, "speed_probe_s": machine.speed_probe(rounds=1)})  # the pace before it
    try:
        if variant.launcher == "bound":
            from course_lib.runner.multiworker import run_bound
            from course_lib.training.machine.capacity import plan_workers

            result = run_bound(variant.script, args, workers=plan_workers(at_most=variant.workers), env=env,
                               timeout=timeout_s, output=_printer, cwd=REPO)
            copies = [e for _, e in result.events if e.get("event") == "result"]
            if len(copies) != variant.workers or any(e.get("images_per_sec") is None for e in copies):
                print(f"!! {variant.label}: {len(copies)} result lines for {variant.workers} copies",
                      file=sys.stderr, flush=True)
                return math.nan, None
            window = copies[0].get("cpu")
            rate = math.fsum(float(e["images_per_sec"]) for e in copies)   # they ran at the same time
            return rate, _with_cpu_per_image(window, copies[0])
        if variant.launcher == "horovod":
            result = launch.run_horovod(variant.script, args, workers=variant.workers,
                                        horovodrun=launch.Horovodrun(controller=variant.controller,
                                                                     extra_args=variant.horovodrun_args),
                                        env=env, timeout=timeout_s, show="all" if idle else "rank0", output=_printer,
                                        cwd=REPO, **other)
        else:
            # A one-process variant holds every core and runs on them: placed on one slot, its
            # threads would share one core while the Horovod variants it is compared with have two.
            from course_lib.training.machine.hardware import cpu_cores
            result = launch.run_python(variant.script, args, env=env, timeout=timeout_s, output=_printer,
                                       cwd=REPO, workers=variant.slots or cpu_cores(), **other)
    except launch.RunFailedError as exc:
        print(f"!! {variant.label} failed: {exc}", file=sys.stderr, flush=True)
        return math.nan, None
    if idle:
        shares = [float(e["cpu_fraction"]) for _, e in result.events if e.get("event") == "idle"]
        if len(shares) != variant.workers:
            print(f"!! {variant.label}: {len(shares)} idle lines for {variant.workers} ranks",
                  file=sys.stderr, flush=True)
            return math.nan, None
        return 100.0 * sum(shares) / len(shares), None
    if result.result is None or result.result.get("images_per_sec") is None:
        print(f"!! {variant.label}: no result line in its output", file=sys.stderr, flush=True)
        return math.nan, None
    return float(result.result["images_per_sec"]), _with_cpu_per_image(result.result.get("cpu"), result.result)


def _with_cpu_per_image(window: dict | None, result: dict) -> dict | None:
    """The CPU window plus ``cpu_s_per_image``: rank 0's CPU seconds over the images it trained in the window."""
    if not window or not result.get("steps") or not result.get("per_worker_batch"):
        return window
    return {**window, "cpu_s_per_image": float(window["cpu_s"]) / (int(result["steps"]) * int(result["per_worker_batch"]))}


def run_interleaved(variants: list[Variant], settings: Settings,
                    data_path: Path) -> rounds.RoundsResult:
    """Run every variant ``settings.repeats`` times, interleaved (a round = every variant once);
    a round the CPU clock judged disturbed is re-run, at most ``settings.max_extra_rounds``
    extra rounds in all (:func:`benchmarks.rounds.collect_rounds`)."""
    stats.interleaved_schedule([v.name for v in variants], settings.repeats)  # checks names
    budget = settings.repeats + settings.max_extra_rounds

    def run_round(i: int) -> dict[str, rounds.Measurement]:
        out = {}
        order = variants if i % 2 == 0 else variants[::-1]   # A B C, C B A: a drift moves every variant alike
        for j, variant in enumerate(order, 1):
            print(f"[round {i + 1} of at most {budget}, {j}/{len(variants)}] {variant.label}",
                  flush=True)
            out[variant.name] = run_variant(variant, data_path, settings.timeout_s)
        return out

    return rounds.collect_rounds(run_round, settings.repeats,
                                 max_extra=settings.max_extra_rounds, printer=_printer)


def run_in_process(command: str, settings: Settings, data_path: Path) -> dict:
    """Run one sub-command of workloads/in_process.py; its ``samples`` event (empty if it
    failed): ``variants`` (the samples), ``cpu`` (windows), ``rounds`` (disturbance counts)."""
    from course_lib.runner import launch

    callback = command == "callback"
    args = [command, "--data", str(data_path),
            "--repeats", str(settings.callback_rounds if callback else settings.repeats),
            "--steps", str(settings.callback_steps if callback else settings.inproc_steps), "--batch", str(BATCH),
            "--images", str(settings.images),
            "--max-extra-rounds", str(settings.max_extra_rounds)]
    print(f"in-process: {command}", flush=True)
    from course_lib.training.machine.hardware import cpu_cores
    try:
        # Every core: its fits use TensorFlow's default threading and the CPU clock expects every core busy (on
        # one slot the process was pinned to one core and every round read "machine idle 49 %").
        result = launch.run_python(IN_PROCESS, args, timeout=settings.timeout_s, output=_printer,
                                   cwd=REPO, workers=cpu_cores())
    except launch.RunFailedError as exc:
        print(f"!! in_process.py {command} failed: {exc}", file=sys.stderr, flush=True)
        return {}
    for _, event in result.events:
        if event.get("event") == "samples":
            event["variants"] = {k: [float(x) for x in v] for k, v in event["variants"].items()}
            return event
    return {}


def time_notebooks(python: str) -> tuple[float | None, int | None, str]:
    """Wall time of ``python -m pytest notebooks -q`` (its output is shown as it runs)."""
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    if not notebooks:
        return None, None, "skipped: no notebooks/*.ipynb yet"
    start = time.perf_counter()
    proc = subprocess.run([python, "-m", "pytest", "notebooks", "-q"], cwd=REPO, check=False)
    return time.perf_counter() - start, proc.returncode, f"{len(notebooks)} notebooks"


def stack_name(python: str) -> str:
    """``Python 3.11.7, TensorFlow 2.15.1, Horovod 0.28.1`` of an interpreter, read by that interpreter with
    the course's one reader of package versions (``doctor.package_version``, through ``PYTHONPATH``)."""
    code = ("import platform\n"
            "from course_lib.environment.doctor import package_version as v\n"
            "print(f'Python {platform.python_version()}, TensorFlow '\n"
            "      f'{v(\"tensorflow\", \"tensorflow-cpu\", \"tensorflow-gpu\")}, Horovod {v(\"horovod\")}')")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False, env=env)
    return proc.stdout.strip() or f"{python} (its versions could not be read: {proc.stderr.strip()[-200:]})"


def runs_of_the_day(out: Path, date: str, stem: str) -> list[str]:
    """The headline of every other section-1h results file of ``date`` in ``out`` (written beside this one's)."""
    found = []
    for path in sorted(out.glob(f"{date}-*.json")):
        if path.stem == stem:
            continue
        try:
            line = (json.loads(path.read_text(encoding="utf-8")).get("headline") or {}).get("line")
        except (OSError, ValueError):
            continue
        if line:
            found.append(f"{path.name}: {line}")
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the options; a bad option exits (status 2) before anything runs."""
    parser = argparse.ArgumentParser(
        description="Measure the course's performance claims (see benchmarks/README.md).")
    parser.add_argument("--quick", action="store_true",
                        help="few repeats and steps: a smoke run, not meaningful figures")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated sections to run, of {', '.join(SECTIONS)} "
                        f"(default: $BENCH_SECTIONS, else {','.join(DEFAULT_SECTIONS)}; 1x is "
                        "opt-in)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="interleaved repeats of every variant (default 5, --quick 2)")
    parser.add_argument("--skip-notebooks", action="store_true",
                        help="leave out section 7 (notebook suite wall time)")
    parser.add_argument("--other-python", default=None,
                        help="section 1s: the interpreter of another venv whose stack is compared "
                        "with this one's (e.g. an old TensorFlow + Horovod build)")
    parser.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"),
                        help="where the .json and .md results go")
    args = parser.parse_args(argv)
    if args.only is None and os.environ.get("BENCH_SECTIONS", "").strip():
        args.only = os.environ["BENCH_SECTIONS"]  # make bench BENCH_SECTIONS=4,5
    try:
        args.sections = (stats.parse_only(args.only, SECTIONS) if args.only is not None
                         else list(DEFAULT_SECTIONS))
        args.settings = make_settings(args.quick, args.repeats)
    except BenchOptionError as exc:
        parser.error(str(exc))
    if ("1s" in args.sections) != (args.other_python is not None):
        parser.error("section 1s and --other-python go together: --only 1s --other-python "
                     "/path/to/other-venv/bin/python")
    if args.other_python is not None:
        found = shutil.which(args.other_python)
        if found is None:
            parser.error(f"--other-python {args.other_python}: no such interpreter")
        args.other_python = found
    if "1h" in args.sections and args.repeats is None and not args.quick:
        args.settings.repeats = max(args.settings.repeats, HEADLINE["rounds"])   # the declared rounds
    if args.skip_notebooks:
        args.sections = [s for s in args.sections if s != "7"]
    if not args.sections:
        parser.error("nothing left to run: --skip-notebooks removed the only section chosen")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the chosen sections, write and print the results; returns the exit status."""
    args = parse_args(argv)
    settings: Settings = args.settings
    sections: list[str] = args.sections
    from course_lib.runner import launch
    from course_lib.training.files import atomic_write_json, atomic_write_text

    python = sys.executable
    if {"1", "1x", "1h", "1s", "1f", "3", "10", "10s"} & set(sections):
        launch.find_horovodrun(python)  # LaunchError before anything runs
    if "1s" in sections:
        launch.find_horovodrun(args.other_python)
    began = time.perf_counter()
    info = machine.describe_machine()
    cores, gpus = int(info["cores"]), list(info["gpus"])
    print(f"Machine: {info['cores']} cores, {info['cpu_model']}, GPUs {gpus or 'none'}, load "
          f"{info['load_average']}; sections {', '.join(sections)}", flush=True)
    declared = None
    if "1h" in sections:   # the headline is named before anything runs, never picked after
        declared = {**HEADLINE, "rounds": settings.repeats, "goal_pct": report.BOUND_GOAL[0],
                    "goal_lower_end_pct": report.BOUND_GOAL[1], "declared_at": datetime.datetime.now().isoformat(
                        timespec="seconds")}
        print(f"Declared before the run: the headline is section 1h, {HEADLINE['variant']} over the "
              f"{HEADLINE['over']}, {settings.repeats} rounds (disturbed rounds re-run, at most "
              f"{settings.max_extra_rounds}); goal >= {report.BOUND_GOAL[0]:g} % with the 95 % interval's lower end "
              f">= {report.BOUND_GOAL[1]:g} %", flush=True)
    samples: dict[str, list[float]] = {}
    inproc: dict[str, dict] = {}
    tuning: dict[str, list[float]] = {}
    gap: dict[str, list[float]] = {}
    stacks: dict[str, list[float]] = {}
    idle: dict[str, list[float]] = {}
    cpu: dict[str, dict] = {}  # CPU-clock windows per group of rounds
    disturbance: dict[str, dict[str, int]] = {}  # section(s) -> rounds run / disturbed / kept
    notebook = (None, None, "not selected")
    reduce_samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="course-bench-") as tmp:
        data_path = Path(tmp) / "fmnist_train.npz"
        if set(sections) - {"7", "8", "10"} or ("8" in sections and gpus):
            print("Loading the real Fashion-MNIST once (course_lib.training.data.load_arrays)", flush=True)
            launch.run_python(IN_PROCESS, ["prepare", "--out", str(data_path)], output=_printer,
                              cwd=REPO, timeout=settings.timeout_s)
        variants = launch_variants(sections, settings, cores, gpus)
        if variants:
            got = run_interleaved(variants, settings, data_path)
            samples, cpu["launched"] = got.samples, {"windows": got.cpu, "log": got.log}
            launched = "/".join(s for s in ("1", "2", "3", "8") if s in sections)
            disturbance[launched] = got.info()
        if "1x" in sections:
            tvars = tuning_variants(settings)
            got = run_interleaved(tvars, settings, data_path)
            tuning, cpu["tuning"] = got.samples, {"windows": got.cpu, "log": got.log}
            disturbance["1x"] = got.info()
            ivars = idle_variants()
            idle = run_interleaved(ivars, settings, data_path).samples
            tuning_labels = {v.name: v.label for v in tvars + ivars}
        if "1h" in sections:
            gvars = gap_variants(settings, cores)
            got = run_interleaved(gvars, settings, data_path)
            gap, cpu["gap"] = got.samples, {"windows": got.cpu, "log": got.log}
            gap_labels = {v.name: v.label for v in gvars}
            disturbance["1h"] = got.info()
        if "1s" in sections:
            svars = stack_variants(settings, cores, args.other_python)
            got = run_interleaved(svars, settings, data_path)
            stacks, cpu["stacks"] = got.samples, {"windows": got.cpu, "log": got.log}
            disturbance["1s"] = got.info()
        for section, command in (("4", "callback"), ("5", "pipeline"), ("6", "batches")):
            if section in sections:
                inproc[section] = run_in_process(command, settings, data_path)
                if inproc[section].get("rounds"):
                    disturbance[section] = inproc[section]["rounds"]
    if "10" in sections:
        chosen = allreduce.settings(COURSE_HOROVOD_ENV)
        reduce_samples = allreduce.run_section(chosen, rounds=settings.allreduce_rounds,
                                               repeats=settings.allreduce_repeats, probe_rounds=3,
                                               timeout_s=settings.timeout_s, printer=_printer)
    step_samples: dict = {}
    frameworks_result: dict = {}
    if "1f" in sections:   # opt-in: notebook 07's four ways against their bounds (benchmarks/frameworks.py, .venv-07)
        from benchmarks import frameworks as section_1f
        frameworks_result = section_1f.frameworks_section(rounds=2 if settings.quick else section_1f.ROUNDS,
                                                          timeout_s=settings.timeout_s, printer=_printer)
    if "10s" in sections:   # opt-in: 2 x ROUNDS launches, about 12 minutes (benchmarks/step_cost.py)
        step_samples = step_cost.run_section(rounds=2 if settings.quick else step_cost.ROUNDS,
                                             timeout_s=settings.timeout_s, printer=_printer, env=COURSE_HOROVOD_ENV)
    if "7" in sections:
        notebook = time_notebooks(python)

    rows: list[Row] = []
    if "1" in sections:
        rows += report.section1_rows(samples, workers=WORKERS, cores=cores)
    if "1x" in sections:
        rows += report.tuning_rows(tuning, tuning_labels, "x_defaults")
        rows += report.idle_rows(idle, tuning_labels)
    if "1h" in sections:
        rows += report.gap_rows(gap, gap_labels, cores=cores)
    if "1s" in sections:
        rows += report.stack_rows(stacks, workers=WORKERS, cores=cores,
                                  other=stack_name(args.other_python), this=stack_name(python))
    if "2" in sections:
        rows += report.section2_rows(samples)
    if "3" in sections:
        rows += report.section3_rows(samples, global_batch=BATCH * WORKERS)
    if "4" in sections:
        rows += report.section4_rows(inproc.get("4", {}).get("variants", {}))
        rows += report.section4_hook_rows(inproc.get("4", {}).get("hooks", {}),
                                          inproc.get("4", {}).get("variants", {}).get("without", []),
                                          int(inproc.get("4", {}).get("steps", settings.callback_steps)))
        rows += report.section4_cpu_rows(inproc.get("4", {}).get("cpu", {}))
    if "5" in sections:
        rows += report.section5_rows(inproc.get("5", {}).get("variants", {}))
    if "6" in sections:
        rows += report.section6_rows(inproc.get("6", {}).get("variants", {}))
    if "7" in sections:
        rows += report.section7_rows(notebook[0], returncode=notebook[1], note=notebook[2])
    if "8" in sections:
        rows += report.section8_rows(samples, gpu=", ".join(gpus) if gpus else
                                     "skipped: no GPU on this machine (nvidia-smi lists none)")
    if "10" in sections:
        rows += allreduce.rows(reduce_samples, chosen)
    if "10s" in sections:
        rows += step_cost.rows(step_samples)
    if "1f" in sections:
        rows += report.frameworks_rows(frameworks_result)
    rows = report.with_disturbance_rows(rows, disturbance)
    headline: dict = {}
    if declared is not None and gap:
        top, over = gap.get(HEADLINE["variant"], []), gap.get(HEADLINE["over"], [])
        per_image = {k: [float((w or {}).get("cpu_s_per_image", math.nan)) for w in ws]
                     for k, ws in cpu.get("gap", {}).get("windows", {}).items()}
        headline = {"declared": declared,
                    "line": report.headline_line(gap_labels.get(HEADLINE["variant"], HEADLINE["variant"]), top, over),
                    "cpu_per_image_flags": report.cpu_per_image_flags(per_image)}
        print(headline["line"], flush=True)

    load_end = machine.load_average()
    now = datetime.datetime.now()
    doc = {
        "date": now.strftime("%Y-%m-%d"), "finished": now.isoformat(timespec="seconds"),
        "machine": info, "load_average_end": load_end, "sections": sections,
        "settings": settings.__dict__, "course_horovod_env": COURSE_HOROVOD_ENV,
        "wall_time_s": time.perf_counter() - began,
        "samples": {"launched": samples, "tuning": tuning, "gap": gap, "stacks": stacks, "idle_cpu_pct": idle,
                    "in_process": inproc, "allreduce": reduce_samples, "step_cost": step_samples,
                    "frameworks": frameworks_result, "cpu_clock": cpu,
                    "notebooks": {"seconds": notebook[0], "returncode": notebook[1],
                                  "note": notebook[2]}},
        "rows": [r.to_dict() for r in rows],
        "headline": headline, "pace_probes_s": PACE,
    }
    doc["notes"] = report.notes(settings.repeats, settings.quick, info, load_end)
    if any("UNDER LOAD" in n for n in doc["notes"]):
        for row in rows:  # a goal verdict under load is not conclusive: say so on the row
            if row.goal:
                row.note = "; ".join(x for x in (row.note, "under load: rerun") if x)
        doc["rows"] = [r.to_dict() for r in rows]
    doc = report.strict_json(doc)
    out = Path(args.out_dir)
    stem = f"{doc['date']}-{socket.gethostname()}{'-quick' if settings.quick else ''}"
    if headline:
        headline["runs_of_the_day"] = runs_of_the_day(out, doc["date"], stem)
    markdown = report.render_markdown(doc, rows, batch=BATCH)
    atomic_write_json(out / f"{stem}.json", doc)
    atomic_write_text(out / f"{stem}.md", markdown)
    print("\n" + markdown, flush=True)
    print(f"Written {out / (stem + '.json')} and {out / (stem + '.md')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
