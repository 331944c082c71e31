"""SafeReward: exceptions, wrong lengths, NaN and hangs are reported with the reward's name, never fatal;
timeouts stop the reward (a killable worker process), a failing row costs only that row, and a reward
that keeps failing stops the run loudly."""

from __future__ import annotations

import decimal
import logging
import math
import os
import pickle
import re
import threading
import time

import pytest

from grpo_rewards import RewardError, SafeReward
from grpo_rewards.contract import DEFAULT_TIMEOUT


def constant(value):
    def fn(completions, **kw):
        return [value] * len(completions)

    return fn


# ---- module-level rewards: they pickle, so SafeReward runs them in a worker process ----


def regex_bomb(completions, **kw):
    """Catastrophic backtracking: C code holding the GIL for ~15 s, deaf to signals and thread timeouts."""
    return [float(re.match(r"(a+)+$", c) is not None) for c in completions]


def sleepy(completions, **kw):
    if any(c == "hang" for c in completions):
        time.sleep(60)
    return [1.0] * len(completions)


def fails_on_bad(completions, answer=None, **kw):
    out = []
    for c in completions:
        if c == "bad":
            raise ValueError("cannot parse 'bad'")
        out.append(float(len(c)))
    return out


def always_raises(completions, **kw):
    raise RuntimeError("broken for good")


def env_reward(completions, **kw):
    return [float("PYTHONPATH" in os.environ)] * len(completions)


def pid_reward(completions, **kw):
    return [float(os.getpid())] * len(completions)


def logs_a_warning(completions, **kw):
    logging.getLogger("acme.rewards").warning("row %d has no reference", 3)
    return [0.5] * len(completions)


def logs_a_metric(completions, log_metric=None, **kw):
    log_metric("reward/seen", float(len(completions)))
    return [1.0] * len(completions)


class Trainer:
    """Stands for TRL's GRPOTrainer: its bound methods reach rewards as keyword arguments, and it does not
    pickle (a model, locks)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.metrics = []

    def log_metric(self, name, value):
        self.metrics.append((name, value))


class Counter:
    """A stateful reward: its count must survive between calls, as it would in-process."""

    def __init__(self):
        self.calls = 0

    def __call__(self, completions, **kw):
        self.calls += 1
        return [float(self.calls)] * len(completions)

    def metrics(self):
        return {"calls": self.calls}


# ---- the contract ----


def test_good_scores_pass_through_as_floats():
    safe = SafeReward(lambda cs, **kw: [1, None, 2.5], "good")
    assert safe(["a", "b", "c"]) == [1.0, None, 2.5]
    assert safe.stats.failures == 0 and safe.stats.rows == 3


def test_exception_is_reported_with_the_name_and_scored_none(caplog):
    def broken(completions, **kw):
        raise ZeroDivisionError("division by zero")

    safe = SafeReward(broken, "my_reward", plugin="acme")
    with caplog.at_level(logging.WARNING, logger="grpo.rewards"):
        assert safe(["a", "b"]) == [None, None]
    assert "reward 'my_reward' (plugin 'acme')" in caplog.text and "ZeroDivisionError" in caplog.text
    assert safe.stats.failure_kinds == {"exception": 1}


@pytest.mark.parametrize("on_error, expected", [("none", [None, None]), ("zero", [0.0, 0.0])])
def test_wrong_length_follows_the_policy(on_error, expected):
    safe = SafeReward(lambda cs, **kw: [1.0], "short", on_error=on_error)
    assert safe(["a", "b"]) == expected
    assert "returned 1 scores for 2 completions" in safe.stats.last_failure


def test_nan_and_inf_are_replaced_row_by_row():
    safe = SafeReward(lambda cs, **kw: [1.0, float("nan"), float("inf"), "x"], "nan", on_error="zero")
    assert safe(list("abcd")) == [1.0, 0.0, 0.0, 0.0]
    assert "row 1: nan" in safe.stats.last_failure


def test_raise_policy_names_the_reward():
    safe = SafeReward(lambda cs, **kw: 3.0, "scalar", on_error="raise")
    with pytest.raises(RewardError, match="reward 'scalar': returned float"):
        safe(["a"])


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="on_error must be one of"):
        SafeReward(constant(1.0), "x", on_error="ignore")


# ---- numbers TRL accepts ----


def test_tensors_numpy_scalars_and_decimals_become_floats():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    values = [torch.tensor(0.5), np.float32(1.5), np.int64(2), decimal.Decimal("0.25"), True, None]
    safe = SafeReward(lambda cs, **kw: values, "mixed", on_error="raise")
    out = safe(list("abcdef"))
    assert out == [0.5, 1.5, 2.0, 0.25, 1.0, None] and all(type(v) is float for v in out[:5])
    assert SafeReward(lambda cs, **kw: torch.tensor([1.0, 2.0]), "t", on_error="raise")(["a", "b"]) == [1.0, 2.0]
    assert SafeReward(lambda cs, **kw: np.array([3.0, 4.0]), "a", on_error="raise")(["a", "b"]) == [3.0, 4.0]


def test_nan_tensors_and_nan_decimals_are_still_rejected():
    torch = pytest.importorskip("torch")
    safe = SafeReward(lambda cs, **kw: [torch.tensor(float("nan")), decimal.Decimal("NaN"), "1.0", torch.ones(2)],
                      "nan", on_error="zero")
    assert safe(list("abcd")) == [0.0, 0.0, 0.0, 0.0]
    assert safe.stats.failed_rows == 4


# ---- timeouts that stop things ----


def test_the_default_timeout_is_finite_and_infinite_ones_are_refused():
    assert SafeReward(constant(1.0), "x").timeout == DEFAULT_TIMEOUT and math.isfinite(DEFAULT_TIMEOUT)
    for bad in (math.inf, 0, -1, math.nan, True):
        with pytest.raises(ValueError, match="timeout must be a positive, finite number"):
            SafeReward(constant(1.0), "x", timeout=bad)


def test_a_picklable_reward_runs_in_a_worker_process():
    safe = SafeReward(pid_reward, "pid")
    assert safe.isolation == "process"
    (pid,) = safe(["a"])
    assert pid != os.getpid()
    safe.close()


def test_a_gil_holding_hang_is_killed_at_the_deadline_and_the_reward_recovers():
    safe = SafeReward(regex_bomb, "bomb", timeout=1.0)
    safe(["a"])  # start the worker (its start-up does not count against the deadline)
    start = time.perf_counter()
    assert safe(["a" * 27 + "b"]) == [None]  # ~15 s of backtracking that no thread timeout can interrupt
    assert time.perf_counter() - start < 6
    assert safe.stats.failure_kinds == {"timeout": 1} and "worker process was killed" in safe.stats.last_failure
    assert safe(["aaa"]) == [1.0]  # not disabled: a fresh worker answers the next call
    safe.close()


def test_a_python_hang_is_killed_too_and_does_not_keep_burning():
    safe = SafeReward(sleepy, "sleepy", timeout=1.0)
    assert safe(["ok"]) == [1.0]
    first = safe._worker._process
    start = time.perf_counter()
    assert safe(["hang", "ok"]) == [None, None]
    assert time.perf_counter() - start < 5
    assert first.poll() is not None  # killed, not abandoned
    assert safe(["ok"]) == [1.0]
    safe.close()


def test_a_script_without_a_main_guard_is_not_rerun_by_the_worker(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "train.py"  # top-level code, no `if __name__ == "__main__":`, as users write
    script.write_text("from grpo_rewards import SafeReward, reward\n"
                      "print('MAIN RAN', flush=True)\n"
                      "safe = SafeReward(reward('xml_count'), 'x')\n"
                      "text = ['<answer>\\n4\\n</answer>\\n']\n"
                      "print(safe.isolation, safe(text) == reward('xml_count')(text), flush=True)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("MAIN RAN") == 1 and "process True" in out.stdout


def test_a_stateful_reward_keeps_its_state_and_reports_its_metrics():
    safe = SafeReward(Counter(), "counter")
    assert safe(["a"]) == [1.0] and safe(["a"]) == [2.0]
    assert safe.metrics() == {"calls": 2}
    safe.close()


def test_what_a_reward_logs_in_its_worker_reaches_the_parents_loggers(caplog):
    safe = SafeReward(logs_a_warning, "chatty")
    with caplog.at_level(logging.WARNING):
        assert safe(["a"]) == [0.5]
    assert safe.isolation == "process"
    (record,) = [r for r in caplog.records if r.name == "acme.rewards"]
    assert record.getMessage() == "row 3 has no reference" and record.process != os.getpid()
    safe.close()


def test_trl_callbacks_are_called_in_the_parent_and_the_trainer_is_never_pickled():
    trainer = Trainer()
    safe = SafeReward(logs_a_metric, "metric")
    assert safe(["a", "b"], log_metric=trainer.log_metric, trainer_state={"global_step": 3}) == [1.0, 1.0]
    assert safe.isolation == "process" and trainer.metrics == [("reward/seen", 2.0)]
    safe.close()


def test_a_column_that_does_not_pickle_runs_that_call_in_a_thread():
    safe = SafeReward(pid_reward, "pid")
    assert safe(["a"], lock=threading.Lock()) == [float(os.getpid())]  # in this process
    (pid,) = safe(["a"])
    assert pid != os.getpid()  # the next call is back in the worker
    safe.close()


def test_an_unpicklable_reward_falls_back_to_a_thread():
    release = threading.Event()
    calls = []

    def hangs(completions, **kw):  # a closure: cannot go to a process
        calls.append(1)
        release.wait(10)
        return [1.0] * len(completions)

    safe = SafeReward(hangs, "hangs", timeout=0.2, max_consecutive_failures=0)
    assert safe.isolation == "thread"
    assert safe(["a", "b"]) == [None, None]
    assert safe(["a"]) == [None]  # still stuck: not called a second time
    assert len(calls) == 1 and safe.stats.failure_kinds == {"timeout": 2}
    assert "does not pickle" in safe.stats.last_failure
    release.set()
    time.sleep(0.1)
    assert safe(["a"]) == [1.0]


# ---- one failing row, not the batch ----


def test_a_row_that_raises_costs_only_that_row_in_a_worker():
    safe = SafeReward(fails_on_bad, "lengths")
    assert safe.isolation == "process"
    assert safe(["ab", "bad", "abcd"], answer=["1", "2", "3"]) == [2.0, None, 4.0]
    assert safe.stats.failed_rows == 1 and "row 1" in safe.stats.last_failure
    safe.close()


def test_a_row_that_raises_costs_only_that_row_in_a_thread():
    seen = []

    def fails(completions, answer, trainer_state=None, **kw):
        seen.append((list(completions), list(answer), trainer_state))
        if "bad" in completions:
            raise ValueError("bad row")
        return [float(a) for a in answer]

    safe = SafeReward(fails, "answers", on_error="zero")
    assert safe(["x", "bad", "y"], answer=["1", "2", "3"], trainer_state="state") == [1.0, 0.0, 3.0]
    assert seen[1:] == [(["x"], ["1"], "state"), (["bad"], ["2"], "state"), (["y"], ["3"], "state")]


def test_a_failure_is_logged_once_with_its_file_and_line_then_counted(caplog):
    safe = SafeReward(fails_on_bad, "lengths", plugin="acme", max_consecutive_failures=0)
    with caplog.at_level(logging.WARNING, logger="grpo.rewards"):
        for _ in range(3):
            safe(["bad", "ok"])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"{__file__}:{fails_on_bad.__code__.co_firstlineno + 4}" in warnings[0].getMessage()
    assert safe.stats.failures == 3 and safe.stats.failed_rows == 3
    safe.close()


# ---- failing loudly ----


def test_consecutive_failures_raise_whatever_the_policy():
    safe = SafeReward(always_raises, "broken", max_consecutive_failures=3)
    assert safe(["a"]) == [None] and safe(["a"]) == [None]
    with pytest.raises(RewardError, match="failed 3 calls in a row"):
        safe(["a"])
    safe.close()


def test_a_success_resets_the_consecutive_count():
    flaky = iter([RuntimeError, RuntimeError, None, RuntimeError, RuntimeError, None])

    def fn(completions, **kw):
        exc = next(flaky)
        if exc:
            raise exc("flaky")
        return [1.0]

    safe = SafeReward(fn, "flaky", max_consecutive_failures=3)
    assert [safe(["a"])[0] for _ in range(6)] == [None, None, 1.0, None, None, 1.0]


# ---- crossing a process boundary ----


def test_safe_reward_pickles_and_gives_the_same_scores():
    safe = SafeReward(fails_on_bad, "lengths", on_error="zero", timeout=30, plugin="acme")
    copy = pickle.loads(pickle.dumps(safe))
    assert (copy.__name__, copy.on_error, copy.timeout, copy.plugin) == ("lengths", "zero", 30.0, "acme")
    assert copy(["ab", "bad"]) == safe(["ab", "bad"]) == [2.0, 0.0]
    copy.close()
    safe.close()


def test_no_interpreter_to_start_means_a_thread_not_a_crash(monkeypatch):
    import sys

    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    safe = SafeReward(pid_reward, "pid")
    assert safe(["a"]) == [float(os.getpid())] and safe.isolation == "thread"


def test_the_worker_sees_the_parents_environment(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    safe = SafeReward(env_reward, "env")
    assert safe(["a"]) == [0.0] and safe.isolation == "process"  # the bootstrap path is not left behind
    safe.close()


def test_bad_values_are_logged_once_even_when_the_rows_differ(caplog):
    values = iter([[1.0, float("nan")], [float("inf"), 2.0], ["x", 3.0]])
    safe = SafeReward(lambda cs, **kw: next(values), "flaky_values", max_consecutive_failures=0)
    with caplog.at_level(logging.WARNING, logger="grpo.rewards"):
        assert [safe(["a", "b"]) for _ in range(3)] == [[1.0, None], [None, 2.0], [None, 3.0]]
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1
    assert safe.stats.failures == 3 and safe.stats.failure_kinds == {"value": 3}
