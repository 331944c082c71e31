"""Fixtures for the trainer tests: a tiny causal LM and a tokenizer trained on the spot (no downloads),
saved with ``save_pretrained`` so tests load them back through ``grpo_core.policy.models``; the demo's tiny
model on its arithmetic task (:func:`arithmetic_model_dir`) and the run config the tests that train it start
from (:func:`tiny_run`); and a registry with a small test reward so run configs validate whatever built-in
rewards exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grpo_rewards import hookimpl
from grpo_rewards.specs import RewardSpec

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CORPUS = [
    "What is 12 plus 7? The answer is 19.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "<answer>42</answer> <reasoning>think step by step</reasoning>",
    "You are a helpful assistant. Solve the problem and put the final answer after ####.",
] * 4


def build_tokenizer(out_dir: Path | None = None, vocab_size: int = 300) -> Any:
    """A byte-level BPE tokenizer trained on a few sentences, with eos/pad/bos and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "</s>", "<s>", "<|system|>", "<|user|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", bos_token="<s>")
    fast.chat_template = CHAT_TEMPLATE
    if out_dir is not None:
        fast.save_pretrained(out_dir)
    return fast


def build_tiny_model(out_dir: Path, tokenizer: Any, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A 2-layer Llama with random weights, saved (with the tokenizer) to ``out_dir``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def arithmetic_rows(size: int = 40) -> list[dict[str, Any]]:
    """The demo's addition problems (operands up to 9), ``size`` training rows."""
    from grpo_core.demo.task import make_split

    return make_split("train", max_operand=9, size=size)


def build_arithmetic_model(out_dir: Path, *, hidden: int = 32, intermediate: int = 64) -> Path:
    """The demo's tiny Llama and character-level tokenizer, trained on worked arithmetic rows and saved to
    ``out_dir``. Any 40 or more rows hold every character of the task, so the saved files are the same
    bytes whatever the number of rows (checked in ``test_arithmetic_model.py``)."""
    from grpo_core.demo.task import completion
    from grpo_core.demo.tiny import TinySpec, build_tiny_model

    texts = [r["prompt"] + completion(r) for r in arithmetic_rows(40)]
    return build_tiny_model(out_dir, texts, TinySpec(hidden=hidden, intermediate=intermediate))


@pytest.fixture(scope="session")
def arithmetic_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`build_arithmetic_model`, once per session; tests read it and write their runs elsewhere."""
    return build_arithmetic_model(tmp_path_factory.mktemp("arithmetic_model"))


def tiny_run(model_dir: Path, output_dir: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """The run config of a few-second run on a tiny model: 2 prompts x 4 completions of 6 tokens, float32,
    no progress line or plot; each of ``sections`` (``grpo={...}``, ``data={...}``, ...) is merged into its
    table key by key."""
    run: dict[str, Any] = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},
        "generation": {"num_generations": 4, "max_completion_length": 6},
        "grpo": {"prompts_per_step": 2},
        "logging": {"output_dir": str(output_dir), "progress": False, "plot": False},
    }
    for name, values in sections.items():
        run[name] = {**run.get(name, {}), **values}
    return run


@pytest.fixture
def fresh_tokenizer() -> Any:
    """A newly trained tokenizer (see :func:`build_tokenizer`), not saved anywhere."""
    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory of a tiny Llama + trained tokenizer, loadable by ``from_pretrained``."""
    out = tmp_path_factory.mktemp("tiny_llama")
    return build_tiny_model(out, build_tokenizer())


class _TestRewards:
    """``core_len``: shorter completions score higher; ``core_match``: 1 if the answer column is in it."""

    @hookimpl
    def grpo_register_rewards(self, register: Any) -> None:
        def core_len(scale: float = 0.01) -> Any:
            def fn(completions: list[Any], **_: Any) -> list[float | None]:
                return [-scale * len(str(c)) for c in completions]
            return fn

        def core_match(value: float = 1.0) -> Any:
            def fn(completions: list[Any], answer: list[Any] | None = None, **_: Any) -> list[float | None]:
                if answer is None:
                    return [None] * len(completions)
                return [value if str(a) in str(c) else 0.0 for c, a in zip(completions, answer)]
            return fn

        register(RewardSpec("core_len", core_len))
        register(RewardSpec("core_match", core_match, columns=("answer",)))


@pytest.fixture(scope="session")
def core_registry() -> Any:
    """The installed plugins plus the test rewards ``core_len`` and ``core_match``."""
    from grpo_rewards.plugins import load_registry

    return load_registry(extra_plugins=[("core_test_rewards", _TestRewards())])


@pytest.fixture
def use_core_registry(core_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make ``core_registry`` the process registry (for code paths calling ``get_registry()``)."""
    import grpo_rewards.plugins as plugins

    monkeypatch.setattr(plugins, "_default", core_registry)
    return core_registry
