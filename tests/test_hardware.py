"""What the machine has (course_lib.training.machine.hardware): GPUs from a fake ``nvidia-smi``, cores shared
between workers, one GPU per local rank. Nothing here imports TensorFlow."""

from __future__ import annotations

import stat

import pytest

from course_lib.training.machine import hardware

CORES = (1, 2, 4, 16)


def _fake_nvidia_smi(tmp_path, body: str, monkeypatch):
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_gpu_names_parses_nvidia_smi(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path, "echo 'GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbb)'\n"
                               "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaa)'", monkeypatch)
    assert hardware.gpu_names() == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]


def test_gpu_names_empty_when_missing_or_failing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert hardware.gpu_names() == []
    _fake_nvidia_smi(tmp_path, "echo 'NVIDIA-SMI has failed' >&2; exit 9", monkeypatch)
    assert hardware.gpu_names() == []


def test_gpu_count_counts_what_nvidia_smi_lists(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path, "echo 'GPU 0: A (UUID: GPU-a)'; echo 'GPU 1: B (UUID: GPU-b)'", monkeypatch)
    assert hardware.gpu_count() == 2
    _fake_nvidia_smi(tmp_path, "exit 9", monkeypatch)
    assert hardware.gpu_count() == 0


@pytest.mark.parametrize("cores, local_size, threads", [
    (1, 1, 1), (1, 2, 1), (2, 1, 2), (2, 2, 1), (4, 2, 2), (4, 3, 1), (16, 2, 8), (16, 8, 2), (16, 32, 1),
])
def test_cores_per_worker_shares_the_cores(cores, local_size, threads):
    assert hardware.cores_per_worker(local_size, cores) == threads


def test_cores_per_worker_defaults_to_this_machine(monkeypatch):
    for cores in CORES:
        monkeypatch.setattr(hardware, "cpu_cores", lambda c=cores: c)
        assert hardware.cores_per_worker(2) == max(1, cores // 2)


@pytest.mark.parametrize("bad", [dict(local_size=0), dict(local_size=True), dict(local_size=2, cores=0)])
def test_cores_per_worker_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="must be an int"):
        hardware.cores_per_worker(**bad)


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_gpu_for_rank_pins_one_gpu_per_local_rank(gpus):
    pinned = [hardware.gpu_for_rank(rank, gpus) for rank in range(8)]
    assert pinned[:gpus] == list(range(gpus))                  # one worker per GPU first
    assert pinned == [rank % gpus for rank in range(8)]         # then they share
    with pytest.raises(ValueError):
        hardware.gpu_for_rank(0, 0)
