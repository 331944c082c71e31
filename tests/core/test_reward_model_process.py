"""The life of a reward model's process (grpo_core.judges.model_process), on a tiny Llama classifier built from a
config and saved to a folder: two aliases of one model start one process (counted among this process's
children), which scores as the model called by hand at any batch size; a model process killed or hung is the
call's counted failure, the next call starting a fresh one; the process ends with a training run, and with a
training process killed outright (SIGKILL, as tests/sandbox/test_soak.py kills a pool's owner).

Each test starts its own model processes (a fresh interpreter importing torch and transformers, a few seconds
each on a CPU): the process's start and end are what is tested.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from tests.core.conftest import tiny_run  # noqa: E402
from tests.core.test_reward_model_builtin import COMPLETIONS, PROMPTS, by_hand, classifier_dir  # noqa: E402, F401

MARK = b"grpo_rewards.isolation.process"  # a worker process's command line


def children(pid: int) -> set[int]:
    """The running worker processes whose parent is ``pid`` (from /proc; zombies are not running)."""
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    cmdline = fh.read()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid and fields[0] != "Z" and MARK in cmdline:
                out.add(int(name))
    return out


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def model_copy(classifier_dir, tmp_path):  # noqa: F811 - the fixture imported above
    """The classifier in a folder of its own: a model no other test has started a process for."""
    return str(shutil.copytree(classifier_dir, tmp_path / "classifier"))


def test_two_aliases_start_one_process_that_scores_as_the_model_by_hand(model_copy):
    from grpo_rewards import compose, reward

    before = children(os.getpid())
    a = reward("reward_model", model=model_copy, batch_size=1)
    b = reward("reward_model", model=model_copy, label=2, normalise="softmax", batch_size=16)
    started = children(os.getpid()) - before
    assert started == {a.process.pid} and b.process is a.process  # one process for both aliases
    expected = by_hand(model_copy, PROMPTS, COMPLETIONS)
    assert a(COMPLETIONS, prompts=PROMPTS) == pytest.approx([e[0] for e in expected], abs=1e-5)
    assert b(COMPLETIONS, prompts=PROMPTS) == pytest.approx([torch.tensor(e).softmax(-1)[2].item() for e in expected],
                                                            abs=1e-6)
    both = compose({"raw": a, "soft": b}).score(COMPLETIONS, prompts=PROMPTS)  # the two called at once
    assert both.columns["raw"] == pytest.approx([e[0] for e in expected], abs=1e-5)
    assert both.columns["soft"] == pytest.approx([torch.tensor(e).softmax(-1)[2].item() for e in expected], abs=1e-6)
    c = reward("reward_model", model=model_copy, batch_size=3)  # a third alias, another batch size
    assert c(COMPLETIONS, prompts=PROMPTS) == pytest.approx([e[0] for e in expected], abs=1e-5)
    assert children(os.getpid()) - before == started  # still the one process
    a.close()
    assert not running(next(iter(started))) and children(os.getpid()) - before == set()


def test_a_killed_or_hung_model_process_is_a_counted_failure_and_the_next_call_starts_afresh(model_copy):
    from grpo_rewards import SafeReward, reward

    fn = reward("reward_model", model=model_copy, request_timeout=10.0)
    safe = SafeReward(fn, "preference", timeout=60, max_consecutive_failures=0)
    expected = [e[0] for e in by_hand(model_copy, PROMPTS, COMPLETIONS)]
    for stop in (signal.SIGKILL, signal.SIGSTOP):  # a crash, then a hang
        pid = fn.process.pid
        assert pid is not None and running(pid)
        os.kill(pid, stop)
        assert safe(COMPLETIONS, prompts=PROMPTS) == [None] * len(COMPLETIONS)  # the call failed, the run goes on
        assert not running(pid) and fn.process.pid is None  # killed, and not restarted row by row
        assert safe(COMPLETIONS, prompts=PROMPTS) == pytest.approx(expected, abs=1e-5)  # a fresh process
        assert fn.process.pid not in (None, pid)
    assert safe.stats.failures == 2 and safe.stats.failed_rows == 2 * len(COMPLETIONS)
    assert "died" in safe.stats.last_failure or "longer than 10s" in safe.stats.last_failure
    fn.close()


def test_the_model_process_ends_with_the_training_run(arithmetic_model_dir, model_copy, tmp_path):
    from grpo_core import Trainer, config_from_dict

    trainer = Trainer(config_from_dict(tiny_run(
        arithmetic_model_dir, tmp_path / "run", model={"gradient_checkpointing": False},
        data={"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        grpo={"max_steps": 1}, checkpoint={"every": 0}, rewards={"preference": {"use": "reward_model",
                                                                               "model": model_copy}})))
    pid = trainer.cfg.rewards.entries[0].fn.fn.process.pid
    assert pid is not None and running(pid)
    trainer.train()
    assert trainer.last_metrics["rewards/preference/rows"] == 8  # the run scored with it
    assert not running(pid)


KILLED_TRAINER = """
import sys
from grpo_rewards import reward
fn = reward("reward_model", model=sys.argv[1])
fn(["a"], prompts=["b"])
print(fn.process.pid, flush=True)
while True:  # busy: the process is killed between or during requests
    fn(["The answer is 19."] * 8, prompts=["What is 12 plus 7?"] * 8)
"""


def test_a_killed_training_process_leaves_no_model_process(model_copy):
    proc = subprocess.Popen([sys.executable, "-c", KILLED_TRAINER, model_copy], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        pid = int(proc.stdout.readline())
        assert running(pid) and children(proc.pid) == {pid}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 10
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pid)
