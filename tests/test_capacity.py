"""What a machine can run (course_lib.training.machine.capacity) and how a run's slots are cut and handed to its
ranks (course_lib.training.machine.placement, course_lib.runner.slots, course_lib.runner.place_rank), on fake
machines: 0, 1, 2 and 8 GPUs (a fake ``nvidia-smi``), ``$COURSE_SLOTS``, a cpuset smaller than the core count.
No process is launched here (tests/test_placement.py launches real runs)."""

from __future__ import annotations

import json
import stat

import pytest

from course_lib.runner import preflight, slots
from course_lib.runner.place_rank import placed_environment
from course_lib.runner.preflight import LaunchError
from course_lib.training.machine import capacity, hardware, placement
from course_lib.training.machine.capacity import CapacityError, machine_capacity, plan_workers
from course_lib.training.machine.placement import GRANT_ENV, PLACEMENT_ENV, Placement, Share, cut_shares, rank_index

GPUS = (0, 1, 2, 8)
CORES = (1, 2, 4, 16)


@pytest.fixture(autouse=True)
def no_slots_env(monkeypatch):
    monkeypatch.delenv("COURSE_SLOTS", raising=False)


def fake_machine(tmp_path, monkeypatch, gpus: int, cores: tuple[int, ...]) -> None:
    """A fake ``nvidia-smi`` listing ``gpus`` GPUs first on PATH, and this process's cores ``cores``."""
    exe = tmp_path / "nvidia-smi"
    lines = "".join(f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})'\n" for i in range(gpus))
    exe.write_text("#!/bin/sh\n" + (lines or "exit 0") + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(hardware, "cpu_core_ids", lambda: cores)
    monkeypatch.setattr(capacity, "cpu_core_ids", lambda: cores)


# ------------------------------------------------------------------ the one owner of capacity
@pytest.mark.parametrize("gpus", GPUS)
def test_capacity_is_gpus_where_there_are_any_else_the_cores_this_process_may_use(tmp_path, monkeypatch, gpus):
    fake_machine(tmp_path, monkeypatch, gpus, (2, 3, 5))          # a cpuset of 3 cores, not 0..n
    cap = machine_capacity()
    assert cap.kind == ("gpu" if gpus else "cpu")
    assert cap.ids == (tuple(range(gpus)) if gpus else (2, 3, 5))
    assert machine_capacity("cpu").ids == (2, 3, 5)                 # the cpuset's own core ids
    assert preflight.capacity() == cap                              # the launcher asks the same owner


def test_course_slots_keeps_the_first_n_and_is_honoured_by_every_caller(tmp_path, monkeypatch):
    fake_machine(tmp_path, monkeypatch, 0, (0, 1, 2, 3))
    monkeypatch.setenv("COURSE_SLOTS", "3")
    assert machine_capacity().ids == (0, 1, 2)
    assert capacity.machine_slots() == 3
    assert preflight.capacity().slots == 3
    plan = plan_workers(at_least=4, at_most=4)
    assert plan.slots == 3 and plan.oversubscribe                  # 4 workers on 3 slots
    request = slots.plan_placement(2)
    assert request is not None and request.capacity.ids == (0, 1, 2)
    with pytest.raises(LaunchError, match="exceeds the 3 slots"):
        slots.plan_placement(4)


@pytest.mark.parametrize("raw, match", [("zero", "must be a positive int"), ("0", "must be a positive int"),
                                        ("-1", "must be a positive int"), ("5", "exceeds this machine's 4 CPU")])
def test_bad_course_slots_says_what_to_do(tmp_path, monkeypatch, raw, match):
    fake_machine(tmp_path, monkeypatch, 0, (0, 1, 2, 3))
    monkeypatch.setenv("COURSE_SLOTS", raw)
    with pytest.raises(CapacityError, match=match):
        machine_capacity()
    with pytest.raises(LaunchError, match=match):                 # the launcher: one clear LaunchError
        preflight.capacity()


def test_gpu_slots_on_a_machine_without_gpus_are_refused(tmp_path, monkeypatch):
    fake_machine(tmp_path, monkeypatch, 0, (0, 1))
    with pytest.raises(CapacityError, match="lists no GPU"):
        machine_capacity("gpu")
    with pytest.raises(LaunchError, match="lists no GPU"):
        slots.plan_placement(1, device="gpu")


# ------------------------------------------------------------------ the lessons' plans
@pytest.mark.parametrize("cores", CORES)
@pytest.mark.parametrize("gpus", GPUS)
def test_plan_workers_for_every_machine_shape(gpus, cores):
    plan = plan_workers(gpus, cores)
    if gpus >= 2:                              # one worker per GPU, at most 8
        assert (plan.device, plan.workers, plan.slots) == ("gpu", gpus, gpus)
        assert not plan.oversubscribe and plan.full_data and plan.ideal_efficiency == 1.0
    else:                                      # no GPU, or one: 2 CPU processes on their own cores
        assert (plan.device, plan.workers, plan.slots) == ("cpu", 2, cores)
        assert plan.oversubscribe == (cores < 2) and not plan.full_data
        assert plan.ideal_efficiency == pytest.approx(min(2, cores) / 2)
    assert str(gpus if gpus >= 2 else cores) in plan.text          # the sentence names this machine


@pytest.mark.parametrize("gpus", GPUS)
def test_never_two_nccl_ranks_on_one_gpu(tmp_path, monkeypatch, gpus):
    """The rule, for every plan and every launch: a GPU run has at most one rank per GPU."""
    fake_machine(tmp_path, monkeypatch, gpus, (0, 1, 2, 3, 4, 5, 6, 7))
    plan = plan_workers(at_most=8)
    if plan.device == "gpu":
        assert plan.workers <= gpus
    assert (plan.device == "cpu") == (gpus < 2)
    assert ("NCCL" in plan.text) == (gpus == 1)                    # 1 GPU: the plan says why CPU ranks
    for workers in range(1, 10):
        try:
            request = slots.plan_placement(workers)             # device=None: GPUs only if enough
        except LaunchError:
            continue
        assert request is not None
        shares = cut_shares(request.device, request.capacity.ids[:request.slots], workers)
        if request.device == "gpu":
            used = [g for share in shares for g in share.gpus]
            assert len(used) == len(set(used)) == workers          # one distinct GPU per rank
        assert request.hide_gpus == (request.device == "cpu" and gpus > 0)
    if gpus:  # asked for explicitly, even with oversubscribe=True: refused before anything starts
        with pytest.raises(LaunchError, match="NCCL refuses"):
            slots.plan_placement(gpus + 1, device="gpu", oversubscribe=True)


def test_one_gpu_machine_runs_the_lessons_on_cpu_and_hides_the_gpu(tmp_path, monkeypatch):
    fake_machine(tmp_path, monkeypatch, 1, (0, 1, 2, 3))
    plan = plan_workers(at_most=2)
    assert (plan.device, plan.workers, plan.oversubscribe) == ("cpu", 2, False)
    request = slots.plan_placement(2, device=plan.device)
    assert request is not None and request.device == "cpu" and request.hide_gpus
    assert slots.plan_placement(1).device == "gpu"               # a 1-worker run may use the GPU


@pytest.mark.parametrize("gpus, kind, simulated", [
    (0, "cpu", True), (1, "gpu", True), (2, "gpu", False), (8, "gpu", False)])
def test_mirrored_layout_for_every_gpu_count(gpus, kind, simulated):
    assert capacity.mirrored_layout(2, gpus) == (kind, simulated)
    assert capacity.mirrored_layout(1, gpus)[1] is False    # one replica is never simulated


@pytest.mark.parametrize("kwargs", [dict(gpus=-1), dict(cores=True), dict(at_least=1),
                                    dict(at_least=4, at_most=3)])
def test_plan_workers_rejects_bad_input(kwargs):
    with pytest.raises(ValueError, match="must be"):
        plan_workers(**{"gpus": 0, "cores": 2, **kwargs})


# ------------------------------------------------------------------ cutting a grant, finding one's share
@pytest.mark.parametrize("kind, resources, workers, expected", [
    ("cpu", (0, 1), 2, [(0,), (1,)]),
    ("cpu", (2, 3, 4, 5), 2, [(2, 3), (4, 5)]),
    ("cpu", (0,), 2, [(0,), (0,)]),                               # oversubscribed: they wrap round
    ("cpu", (0, 1, 2), 2, [(0,), (1,)]),
    ("gpu", (0, 1, 2, 3), 4, [(0,), (1,), (2,), (3,)]),
    ("gpu", (4, 5), 1, [(4, 5)]),                                 # one process on both GPUs
])
def test_cut_shares(kind, resources, workers, expected):
    shares = cut_shares(kind, resources, workers)
    assert [s.gpus if kind == "gpu" else s.cpus for s in shares] == expected


def test_cut_shares_never_puts_two_workers_on_one_gpu():
    with pytest.raises(placement.PlacementError, match="NCCL refuses"):
        cut_shares("gpu", (0,), 2)


@pytest.mark.parametrize("env, hosts, expected", [
    ({"HOROVOD_HOSTNAME": "127.0.0.1", "HOROVOD_LOCAL_RANK": "0", "HOROVOD_RANK": "0"},
     (("localhost", 1), ("127.0.0.1", 1)), 1),                    # two names of one machine: slot 1
    ({"HOROVOD_HOSTNAME": "localhost", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_RANK": "0"},
     (("localhost", 2),), 1),                                     # elastic re-ranked: its slot stays
    ({"OMPI_COMM_WORLD_RANK": "3"}, (), 3),
    ({"COURSE_WORKER_INDEX": "1"}, (), 1),
    ({}, (), 0),
])
def test_rank_index(env, hosts, expected):
    assert rank_index(env, hosts) == expected


def test_two_hosts_of_one_machine_get_different_cores_though_both_are_local_rank_0():
    run = Placement(cut_shares("cpu", (0, 1), 2), (("localhost", 1), ("127.0.0.1", 1)))
    cores = []
    for host in ("localhost", "127.0.0.1"):
        env = {PLACEMENT_ENV: run.to_env(), "HOROVOD_HOSTNAME": host, "HOROVOD_LOCAL_RANK": "0",
               "HOROVOD_RANK": "0" if host == "localhost" else "1"}
        out, pinned = placed_environment(env)
        assert PLACEMENT_ENV not in out and GRANT_ENV in out
        cores.append(pinned)
    assert cores == [(0,), (1,)] or sorted(cores) == [(0,), (1,)]


@pytest.mark.parametrize("gpus", [2, 8])
def test_cuda_visible_devices_per_rank_from_the_environment_the_launcher_builds(tmp_path, monkeypatch, gpus):
    """The launcher's request on a fake GPU machine -> $COURSE_PLACEMENT -> each rank's environment."""
    fake_machine(tmp_path, monkeypatch, gpus, (0, 1, 2, 3))
    request = slots.plan_placement(gpus)
    assert request is not None and request.device == "gpu"
    shares = cut_shares(request.device, request.capacity.ids[:request.slots], gpus)
    spec = Placement(shares, request.hosts, request.hide_gpus).to_env()
    seen = []
    for rank in range(gpus):
        env, cores = placed_environment({PLACEMENT_ENV: spec, "HOROVOD_HOSTNAME": "localhost",
                                         "HOROVOD_LOCAL_RANK": str(rank), "HOROVOD_RANK": str(rank)})
        seen.append(env["CUDA_VISIBLE_DEVICES"])
        assert cores == () and f"gpus={rank}" in env[GRANT_ENV]
    assert seen == [str(g) for g in range(gpus)]


def test_cpu_ranks_on_a_gpu_machine_see_no_gpu(tmp_path, monkeypatch):
    fake_machine(tmp_path, monkeypatch, 1, (0, 1))
    request = slots.plan_placement(2, device="cpu")
    spec = Placement(cut_shares("cpu", request.capacity.ids, 2), request.hosts, request.hide_gpus).to_env()
    env, _ = placed_environment({PLACEMENT_ENV: spec, "HOROVOD_RANK": "1"})
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_a_granted_core_outside_a_narrower_cpuset_is_dropped(monkeypatch, capsys):
    monkeypatch.setattr("course_lib.runner.place_rank.cpu_core_ids", lambda: (2, 3))
    spec = Placement((Share(cpus=(0,)),)).to_env()
    env, cores = placed_environment({PLACEMENT_ENV: spec})
    assert cores == () and "running unpinned" in capsys.readouterr().err


def test_a_malformed_placement_is_one_clear_error():
    with pytest.raises(placement.PlacementError, match="is not a placement"):
        placed_environment({PLACEMENT_ENV: json.dumps({"shares": []})})


def test_no_placement_changes_nothing():
    env = {"PATH": "/bin"}
    assert placed_environment(env) == (env, ())


def test_runs_on_other_machines_hold_no_slot(tmp_path, monkeypatch):
    fake_machine(tmp_path, monkeypatch, 0, (0, 1))
    assert slots.plan_placement(4, hosts="node1:2,node2:2") is None
    assert slots.plan_placement(2, hosts="localhost:1,127.0.0.1:1") is not None


def test_a_rank_without_a_grant_claims_a_free_gpu_by_its_nvidia_smi_index(tmp_path, monkeypatch):
    """Two ranks of one machine that a plain horovodrun started (no grant), both local rank 0 (two
    "hosts"), seeing GPUs 2 and 3: each claims a GPU of its own, named as nvidia-smi numbers it."""
    monkeypatch.setenv("COURSE_SLOTS_DIR", str(tmp_path / "slots"))
    env = {"HOROVOD_RANK": "0", "CUDA_VISIBLE_DEVICES": "2,3"}
    before = len(placement._claims)
    try:
        first = placement.worker_share(0, 1, gpus=2, env=env)
        second = placement.worker_share(0, 1, gpus=2, env=env)  # the other "host": same local rank
        third = placement.worker_share(0, 1, gpus=2, env=env)   # nothing left: the classic idiom
        assert (first.source, first.gpu_index) == ("claimed", 0)
        assert (second.source, second.gpu_index) == ("claimed", 1)
        assert third.source.startswith("local rank") and third.gpu_index == 0
        assert sorted(p.name for p in (tmp_path / "slots").glob("gpu-*.lock")) == ["gpu-02.lock", "gpu-03.lock"]
        outside = placement.worker_share(0, 1, gpus=2, env={"CUDA_VISIBLE_DEVICES": "2,3"})
        assert outside.source.startswith("local rank")  # not under a launcher (a kernel): no claim
    finally:
        import os

        while len(placement._claims) > before:
            os.close(placement._claims.pop())


# -- the device rule, written once (issue 54), and a plan resized for one run ---------------------------
@pytest.mark.parametrize("workers, gpu_slots, device", [(2, 0, "cpu"), (2, 1, "cpu"), (1, 1, "gpu"), (2, 2, "gpu"),
                                                        (3, 2, "cpu"), (8, 8, "gpu")])
def test_the_device_rule_is_gpus_only_with_one_per_worker(workers, gpu_slots, device):
    assert capacity.device_for(workers, gpu_slots) == device


def test_a_plan_resized_for_one_run_keeps_its_device_while_each_worker_has_a_slot():
    gpu_plan = capacity.plan_workers(gpus=2, cores=8, slots_env="")
    assert (gpu_plan.device, gpu_plan.workers) == ("gpu", 2)
    baseline = gpu_plan.with_workers(1)
    assert (baseline.device, baseline.workers, baseline.oversubscribe) == ("gpu", 1, False)
    three = gpu_plan.with_workers(3, oversubscribe=True)     # 3 ranks on 2 GPUs: CPU processes (the rule)
    assert (three.device, three.oversubscribe) == ("cpu", True)
    cpu_plan = capacity.plan_workers(gpus=1, cores=2, slots_env="")   # 1 GPU: the lesson runs on CPU cores
    assert cpu_plan.device == "cpu" and cpu_plan.with_workers(1).device == "cpu"  # its baseline too
    assert cpu_plan.with_workers(3).oversubscribe and cpu_plan.with_workers(3).ideal_efficiency == 2 / 3
    assert not cpu_plan.with_workers(2).oversubscribe
    with pytest.raises(ValueError, match="workers must be an int >= 0"):
        cpu_plan.with_workers(-1)
