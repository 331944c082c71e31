"""Rewards scored while the transformers backend still generates (``generation.score_during_generation``):
the same scores, columns and order as scoring the batch afterwards, scoring that really starts before
generation ends, and a part whose reward call fails losing only its own rows."""

from __future__ import annotations

import math
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


class Length:
    """A module-level reward (it pickles, so it runs in its own worker process)."""

    __name__ = "length"

    def __call__(self, completions, **kw):
        return [float(len(c)) for c in completions]


class Columns:
    """Uses the columns a run passes: the reference answer, the token ids and the trainer state."""

    __name__ = "columns"

    def __call__(self, completions, answer, completion_ids, trainer_state, **kw):
        return [None if len(ids) % 3 == 0 else float(str(a) in c) + len(ids) / 100 + trainer_state.global_step
                for c, a, ids in zip(completions, answer, completion_ids, strict=True)]


class RaisesOnShort:
    """Raises on a call holding a completion of at most 3 tokens; each row is then retried on its own."""

    __name__ = "raises"

    def __call__(self, completions, completion_ids, **kw):
        if any(len(ids) <= 3 for ids in completion_ids):
            raise ValueError("short completion")
        return [1.0] * len(completions)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from grpo_core.demo.task import completion, make_split
    from grpo_core.demo.tiny import TinySpec, build_tiny_model

    rows = make_split("train", max_operand=9, size=30)
    path = tmp_path_factory.mktemp("overlap-model")
    # a random model over a character vocabulary: EOS comes after a few to a few dozen tokens
    return build_tiny_model(path, [r["prompt"] + completion(r) for r in rows],
                            TinySpec(hidden=32, intermediate=64, max_positions=128))


def make_trainer(model_dir, tmp_path, rewards, *, during: bool = True, k: int = 4, prompts: int = 8):
    from grpo_core import Trainer, config_from_dict

    return Trainer(config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": k, "max_completion_length": 60, "score_during_generation": during},
        "grpo": {"learning_rate": 1e-3, "prompts_per_step": prompts, "max_steps": 1},
        "logging": {"output_dir": str(tmp_path / f"run-{during}"), "progress": False, "plot": False},
        "rewards": rewards,
    }))


def recorder():
    """A reward (runs in a thread: a closure does not pickle) recording when each call starts and its size."""
    calls: list[tuple[float, int]] = []

    def recorded(completions, **kw):
        calls.append((time.monotonic(), len(completions)))
        return [0.0] * len(completions)

    return recorded, calls


def same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


def test_scores_during_generation_equal_scoring_afterwards(model_dir, tmp_path):
    from grpo_rewards import compose

    out = {}
    for during in (False, True):
        recorded, calls = recorder()
        rewards = compose({"length": (Length(), 0.5), "columns": Columns(), "raises": RaisesOnShort(),
                           "calls": recorded})
        trainer = make_trainer(model_dir, tmp_path, rewards, during=during)
        torch.manual_seed(3)
        batch, total, columns = trainer.sample_and_score(trainer.next_rows())
        out[during] = batch, total.tolist(), columns, [n for _, n in calls], torch.rand(1).item()
        assert rewards.entries[2].fn.stats.calls == 1  # the parts of a batch are one call of each reward
    (b0, t0, c0, parts0, r0), (b1, t1, c1, parts1, r1) = out[False], out[True]
    assert parts0 == [32] and len(parts1) >= 2 and sum(parts1) == 32  # scored in several parts
    assert b0.completions_text == b1.completions_text and torch.equal(b0.completion_ids, b1.completion_ids)
    assert r0 == r1  # the torch RNG stream after the step is the same: nothing drew from it
    assert same(t0, t1)
    assert c0 == c1
    lengths = b1.completion_mask.sum(1).tolist()
    assert any(n <= 3 for n in lengths) and c1["raises"] == [None if n <= 3 else 1.0 for n in lengths]
    assert any(v is None for v in c1["columns"]) and any(v is not None for v in c1["columns"])


def test_scoring_starts_before_generation_ends(model_dir, tmp_path):
    from grpo_rewards import compose

    called = threading.Event()
    calls: list[tuple[float, int]] = []

    def recorded(completions, **kw):
        calls.append((time.monotonic(), len(completions)))
        called.set()
        return [0.0] * len(completions)

    trainer = make_trainer(model_dir, tmp_path, compose({"calls": recorded}))
    generate, ended, handed = trainer.backend.generate, [], threading.Event()

    def timed_generate(*args, on_groups=None, **kwargs):
        def first_handed(*a):
            on_groups(*a)
            handed.set()

        batch = generate(*args, on_groups=first_handed, **kwargs)
        ended.append(time.monotonic())
        return batch

    def wait_for_scoring(module, args):
        # once groups are handed over, the next decode step waits (a bounded time) for their scoring to start,
        # so the order below does not depend on how busy the machine is; scoring only after generation would
        # still come after the end
        if handed.is_set() and not called.is_set():
            called.wait(timeout=20)

    trainer.backend.generate = timed_generate
    hook = trainer.model.register_forward_pre_hook(wait_for_scoring)
    try:
        torch.manual_seed(3)
        trainer.sample_and_score(trainer.next_rows())
    finally:
        hook.remove()
    assert len(calls) >= 2 and calls[0][0] < ended[0]  # the first groups were scored while the rest generated


def test_a_failed_part_leaves_only_its_own_rows_unscored(model_dir, tmp_path):
    from grpo_rewards import compose

    sizes: list[int] = []
    lock = threading.Lock()

    def first_call_fails(completions, **kw):  # a wrong number of scores: the whole call fails
        with lock:
            sizes.append(len(completions))
            return [1.0] * (len(completions) - (len(sizes) == 1))

    rewards = compose({"flaky": first_call_fails})
    trainer = make_trainer(model_dir, tmp_path, rewards)
    torch.manual_seed(3)
    _, total, columns = trainer.sample_and_score(trainer.next_rows())
    first = sizes[0]
    assert len(sizes) >= 2 and first < len(total)
    assert all(math.isnan(t) for t in total[:first].tolist())
    assert total[first:].tolist() == [1.0] * (len(total) - first)
    stats = rewards.entries[0].fn.stats
    assert (stats.calls, stats.failures, stats.failed_rows, stats.consecutive_failures) == (1, 1, first, 0)


def test_off_scores_the_whole_batch_at_once(model_dir, tmp_path):
    from grpo_rewards import compose

    recorded, calls = recorder()
    trainer = make_trainer(model_dir, tmp_path, compose({"calls": recorded}), during=False)
    torch.manual_seed(3)
    trainer.sample_and_score(trainer.next_rows())
    assert [n for _, n in calls] == [32]


def test_sample_groups_hands_over_finished_groups_in_order(model_dir):
    from grpo_core.config import config_from_dict
    from grpo_core.generation.group_sampling import sample_groups
    from grpo_core.policy.models import load_model_and_tokenizer

    cfg = config_from_dict({"model": {"name_or_path": str(model_dir), "dtype": "float32"},
                            "data": {"source": "demo:arithmetic?max_operand=9", "chat_template": False},
                            "generation": {"max_completion_length": 60},
                            "rewards": {"correct": {"use": "exact_match"}}})
    model, tok = load_model_and_tokenizer(cfg)
    model.eval()
    tok.padding_side = "left"
    enc = tok(["1+2=", "3+4=", "5+6=", "7+8=", "9+1=", "2+2="], return_tensors="pt", padding=True)
    args = (model, enc["input_ids"], enc["attention_mask"], 3)
    kwargs = {"max_new_tokens": 50, "eos_ids": [tok.eos_token_id], "pad_id": tok.pad_token_id}
    torch.manual_seed(4)
    ids, logps = sample_groups(*args, **kwargs)
    parts = []

    def on_groups(part_ids, part_logps, first, end, steps):
        parts.append((first, end, part_ids[first * 3 : end * 3, :steps].clone(), part_logps[first * 3 : end * 3, :steps].clone()))

    torch.manual_seed(4)
    ids2, logps2 = sample_groups(*args, **kwargs, on_groups=on_groups)
    assert torch.equal(ids, ids2) and torch.equal(logps, logps2)
    assert [p[0] for p in parts] == [0] + [p[1] for p in parts[:-1]] and parts[-1][1] == 6 and len(parts) >= 2
    for first, end, part_ids, part_logps in parts:
        width = part_ids.size(1)
        assert torch.equal(ids[first * 3 : end * 3, :width], part_ids)
        assert torch.equal(logps[first * 3 : end * 3, :width], part_logps)
        assert (ids[first * 3 : end * 3, width:] == tok.pad_token_id).all()  # nothing more was written to them


class FirstGroupOnly:
    """A backend handing over only its first group (and, with ``tamper``, a first group that differs from the
    batch it returns): the rest must be scored afterwards, a difference refused."""

    hands_over_groups = True

    def __init__(self, inner, k, tamper=False):
        self.inner, self.k, self.tamper = inner, k, tamper

    def generate(self, prompts, num_generations, *, greedy=False, on_groups=None):
        from grpo_core.generation import Generation

        batch = self.inner.generate(prompts, num_generations, greedy=greedy)
        k, texts = self.k, list(batch.completions_text[: self.k])
        if self.tamper:
            texts[0] += "!"
        on_groups(0, Generation(batch.prompt_ids[:k], batch.prompt_mask[:k], batch.completion_ids[:k],
                                batch.completion_mask[:k], texts, batch.truncated[:k]))
        return batch


def test_groups_not_handed_over_are_scored_after_and_a_different_hand_over_is_refused(model_dir, tmp_path):
    from grpo_rewards import compose

    recorded, calls = recorder()
    trainer = make_trainer(model_dir, tmp_path, compose({"calls": recorded, "length": Length()}))
    inner = trainer.backend
    trainer.backend = FirstGroupOnly(inner, 4)
    torch.manual_seed(3)
    batch, total, columns = trainer.sample_and_score(trainer.next_rows())
    assert [n for _, n in calls] == [4, 28]
    assert columns["length"] == [float(len(t)) for t in batch.completions_text]
    trainer.backend = FirstGroupOnly(inner, 4, tamper=True)
    with pytest.raises(RuntimeError, match="handed over rows 0-3 that differ"):
        trainer.sample_and_score(trainer.next_rows())
