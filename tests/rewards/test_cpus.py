"""The reward worker pools' CPU share: the process's CPUs split among the training processes on the machine."""

from __future__ import annotations

import os

import pytest

from grpo_rewards.cpus import cpu_share
from grpo_rewards.isolation.pool import default_workers


@pytest.fixture
def eight_cpus(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    return monkeypatch


def test_one_process_gets_every_cpu(eight_cpus: pytest.MonkeyPatch) -> None:
    assert cpu_share() == 8
    assert default_workers() == 8


@pytest.mark.parametrize("local, share", [("2", 4), ("3", 2), ("8", 1), ("16", 1), ("x", 8), ("0", 8)])
def test_torchrun_processes_split_the_cpus(eight_cpus: pytest.MonkeyPatch, local: str, share: int) -> None:
    eight_cpus.setenv("LOCAL_WORLD_SIZE", local)
    assert cpu_share() == share
    assert default_workers() == share


def test_the_sandbox_pool_sizes_its_slots_by_the_share(monkeypatch: pytest.MonkeyPatch) -> None:
    from grpo_rewards.sandbox.pool import LocalSandbox

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with LocalSandbox() as pool:
        assert pool.slots == 2  # two per core of this process's one core, not two per core of the machine
