"""The isolation layer's own pieces (the thread fallback, the generic process worker), the hook isolation of the
plugin manager, and the modules the entry points name."""

from __future__ import annotations

import os
import threading
import time
import tomllib
from pathlib import Path

import pytest

from grpo_rewards.isolation.failed import WorkerFailed
from grpo_rewards.isolation.process import ProcessWorker, pickled_or_none
from grpo_rewards.isolation.thread import ThreadRunner

ROOT = Path(__file__).resolve().parents[2]


class Counter:
    """State that must survive between calls in its worker process."""

    def __init__(self) -> None:
        self.n = 0


def count(counter: Counter, request: float) -> tuple[int, int]:
    counter.n += 1
    if request:
        time.sleep(request)
    return counter.n, os.getpid()


def test_the_process_worker_keeps_its_object_between_calls_and_kills_a_call_past_its_deadline():
    worker = ProcessWorker(pickled_or_none(Counter()), "counter", count, start_timeout=60)
    try:
        (first, pid), (second, same_pid) = worker.request(0, timeout=30), worker.request(0, timeout=30)
        assert (first, second) == (1, 2) and pid == same_pid != os.getpid()
        with pytest.raises(WorkerFailed) as failed:
            worker.request(30, timeout=0.5)
        assert failed.value.kind == "timeout" and not worker.alive
        assert worker.request(0, timeout=30)[0] == 1  # a fresh child, a fresh object
        with pytest.raises(WorkerFailed) as failed:
            worker.request(threading.Lock(), timeout=30)
        assert failed.value.kind == "unsendable"
    finally:
        worker.close()


def test_the_thread_runner_stops_waiting_refuses_while_busy_and_passes_on_what_fn_raises():
    runner = ThreadRunner("test-runner")
    release = threading.Event()
    with pytest.raises(WorkerFailed, match="took longer than 0.2s") as failed:
        runner.call(release.wait, 30, timeout=0.2)
    assert failed.value.kind == "timeout"
    with pytest.raises(WorkerFailed, match="still running from an earlier call"):
        runner.call(lambda: 1, timeout=5)
    release.set()
    time.sleep(0.2)
    assert runner.call(lambda x: x + 1, 1, timeout=5) == 2

    def raises_timeout() -> None:
        raise TimeoutError("its own")

    with pytest.raises(TimeoutError, match="its own"):  # the function's own TimeoutError is not a deadline
        runner.call(raises_timeout, timeout=5)


def test_an_implementation_registered_after_loading_is_isolated_too():
    from grpo_rewards import hookimpl
    from grpo_rewards.plugins import load_registry

    class Late:
        @hookimpl
        def grpo_register_commands(self, subparsers):
            raise RuntimeError("late and broken")

    registry = load_registry(only=["grpo-toolkit"])
    registry.manager.register(Late(), name="late")
    import argparse

    assert registry.hook.grpo_register_commands(subparsers=argparse.ArgumentParser().add_subparsers()) == []
    assert registry.hook_failures == {("late", "grpo_register_commands"): 1}
    assert any("late and broken" in p for p in registry.problems)


def test_the_entry_points_name_the_new_modules():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["grpo"] == "grpo_rewards.command_line:main"
    grpo = project["entry-points"]["grpo"]
    assert (grpo["builtin_rewards"], grpo["builtin_cli"]) == ("grpo_rewards.builtins.catalogue",
                                                              "grpo_rewards.reward_commands")
