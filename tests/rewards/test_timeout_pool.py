"""The process pool behind math_equivalence: hard per-item timeouts, recovery, reuse, no leaked processes."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from grpo_rewards.isolation import pool as timeout_pool
from grpo_rewards.isolation.pool import Outcome, run_items


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"  # a zombie is not running
    except FileNotFoundError:
        return False


def _pool_pids() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


@pytest.fixture(autouse=True, scope="module")
def stop_pools_after():
    yield
    timeout_pool.shutdown()


def test_results_in_order_across_many_chunks():
    items = [(-i,) for i in range(500)]
    assert [o.value for o in run_items(abs, items, timeout=5, workers=2)] == list(range(500))


def test_python_level_hang_times_out_and_the_rest_of_the_chunk_runs():
    start = time.perf_counter()
    out = run_items(time.sleep, [(0,), (60,), (0,)], timeout=0.5, workers=2)
    assert [o.status for o in out] == ["ok", "timeout", "ok"]
    assert "timed out after 0.5s" in out[1].reason
    assert time.perf_counter() - start < 20


def test_c_level_hang_is_killed_and_the_worker_replaced():
    # sum() over a huge range runs in C and never lets a Python signal handler run: only a kill stops it
    start = time.perf_counter()
    out = run_items(sum, [(range(3),), (range(10**13),), (range(4),)], timeout=0.5, workers=2)
    assert [o.status for o in out] == ["ok", "timeout", "ok"]
    assert [out[0].value, out[2].value] == [3, 6]
    assert "worker killed" in out[1].reason
    assert time.perf_counter() - start < 30
    assert run_items(abs, [(-2,)], timeout=5, workers=2) == [Outcome("ok", 2)]


def test_exceptions_are_outcomes_not_raised():
    out = run_items(int, [("12",), ("twelve",)], timeout=5, workers=2)
    assert out[0] == Outcome("ok", 12)
    assert out[1].status == "error" and "ValueError" in out[1].reason


def test_timeouts_work_from_a_non_main_thread():
    box: list = []
    thread = threading.Thread(target=lambda: box.append(run_items(time.sleep, [(60,), (0,)], timeout=0.5, workers=2)))
    thread.start()
    thread.join(30)
    assert [o.status for o in box[0]] == ["timeout", "ok"]


def test_pool_is_lazy_reused_and_shut_down_without_leaking_processes():
    timeout_pool.shutdown()
    before = _pool_pids()
    assert not timeout_pool._pools
    run_items(abs, [(1,)], timeout=5, workers=2)
    pool = timeout_pool._pools[(2, "spawn", None)][1]
    run_items(abs, [(2,)], timeout=5, workers=2)
    assert timeout_pool._pools[(2, "spawn", None)][1] is pool  # reused, not restarted
    workers = _pool_pids() - before
    assert len(workers) == 2
    timeout_pool.shutdown()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers)
    assert not timeout_pool._pools


def test_fork_start_method_works_too():
    assert run_items(abs, [(-3,)], timeout=5, workers=1, start_method="fork") == [Outcome("ok", 3)]


@pytest.mark.parametrize(("kwargs", "message"), [({"timeout": 0}, "timeout must be"), ({"start_method": "x"}, "start_method")])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_items(abs, [(1,)], **{"timeout": 1, **kwargs})


def test_no_items_starts_nothing():
    timeout_pool.shutdown()
    assert run_items(abs, [], timeout=1) == []
    assert not timeout_pool._pools


def test_rebuilt_after_fork_in_the_child():
    run_items(abs, [(1,)], timeout=5, workers=1, start_method="fork")
    parent_pool = timeout_pool._pools[(1, "fork", None)][1]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child must not reuse the parent's pool
        try:
            ok = run_items(abs, [(-5,)], timeout=5, workers=1, start_method="fork") == [Outcome("ok", 5)]
            ok = ok and timeout_pool._pools[(1, "fork", None)][1] is not parent_pool
            timeout_pool.shutdown()
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
