"""Multi-turn rollouts with tools on a real tiny model (tests/core/tool_models.py): the trainer's log-probs of the
model's own tokens equal the sampler's across turns (the on-policy test, multi-turn), the tools' tokens are in the
context and out of the loss, and a run with tools trains, its rewards seeing the conversations and the facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from tool_models import tool_calling_model, tool_tokenizer

PROMPTS = ["What is 6*7?", "Add 2 and 3."]


@pytest.fixture(scope="module")
def tool_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tool_calling_model(tmp_path_factory.mktemp("tool_model"), tool_tokenizer())


def _cfg(model_dir: Path, tmp_path: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "answer": "42"}) + "\n" for p in PROMPTS))
    cfg: dict[str, Any] = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": str(data), "shuffle": False, "max_prompt_length": 1024, "chat_template": True,
                 "system_prompt": "Use the tools."},
        "generation": {"num_generations": 4, "max_completion_length": 240, "temperature": 0.8},
        "grpo": {"max_steps": 1, "prompts_per_step": 2, "learning_rate": 1e-3},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"len": {"use": "core_len"}},
        "tools": {"names": ["calculator"], "max_tool_calling_iterations": 4, "max_output_chars": 10},
    }
    for name, values in sections.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    return cfg


def _batch(model_dir: Path, tmp_path: Path, **sections: dict[str, Any]) -> tuple[Any, Any, Any]:
    from grpo_core.config import config_from_dict
    from grpo_core.data import format_prompt
    from grpo_core.generation.transformers_backend import TransformersBackend
    from grpo_core.policy.models import load_model_and_tokenizer

    cfg = config_from_dict(_cfg(model_dir, tmp_path, **sections))
    model, tok = load_model_and_tokenizer(cfg)
    backend = TransformersBackend(cfg, model, tok)
    prompts = [format_prompt({"prompt": p}, cfg.data, tok, backend.tool_schemas) for p in PROMPTS]
    assert '"name": "calculator"' in prompts[0]  # the template told the model about its tool
    torch.manual_seed(0)
    return model, backend.generate(prompts, cfg.generation.num_generations), tok


def test_the_trainers_log_probs_are_the_samplers_across_turns(tool_model_dir, tmp_path, use_core_registry):
    """Temperature 0.8, contexts of every length re-batched each turn: the trainer's log-probs of the model's own
    tokens, over the whole conversation at once, equal the sampler's to 1e-4, in every turn."""
    from grpo_core.policy.logprobs import completion_logprobs

    model, batch, _ = _batch(tool_model_dir, tmp_path)
    facts = batch.tool_facts
    assert batch.tool_mask is not None and facts is not None
    assert max(f["turns"] for f in facts) >= 3, facts  # the test is one of several turns
    tool_tokens = (batch.completion_mask.bool() & (batch.tool_mask == 0))
    assert tool_tokens.any()
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    attn = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    with torch.no_grad():
        ours, _ = completion_logprobs(model, ids, attn, batch.completion_ids.size(1), temperature=0.8)
    own = (batch.completion_mask * batch.tool_mask).bool()
    assert int(own.sum()) > 50
    assert (ours - batch.sampling_logps)[own].abs().max() < 1e-4
    assert (batch.sampling_logps[tool_tokens] == 0).all()  # the tools' tokens have no sampler log-prob
    # each later turn starts after tool tokens: the model's tokens there were drawn in a later, re-batched call
    later = own & (torch.cumsum(tool_tokens.int(), 1) > 0)
    assert later.any()


def test_a_run_with_tools_trains_on_the_models_tokens_and_rewards_see_the_conversation(
        tool_model_dir, tmp_path, use_core_registry, monkeypatch):
    """A step with the built-in calculator and a Python function given as TRL's ``tools=``: the loss mask is
    the model's tokens only, and the rewards get each conversation and its counts."""
    from grpo_core.trainer import Trainer

    seen: list[dict[str, Any]] = []

    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: what to look up
        """
        return key.upper()

    cfg = _cfg(tool_model_dir, tmp_path, logging={"sample_every": 1})
    trainer = Trainer(cfg, tools=[lookup])
    assert [s["function"]["name"] for s in trainer.backend.tool_schemas] == ["calculator", "lookup"]
    original = trainer._score

    def spy(rows: list[dict[str, Any]], batch: Any, k: int | None = None) -> Any:
        completions, columns = trainer._reward_inputs(rows, batch, k or 4)
        seen.append({"completions": completions, "facts": batch.tool_facts,
                     **{c: columns[c] for c in columns if c.startswith("num_")}})
        plan = trainer._plans(batch)[0]
        assert torch.equal(plan.mask, batch.completion_mask * batch.tool_mask)
        return original(rows, batch, k)

    monkeypatch.setattr(trainer, "_score", spy)
    trainer.train()
    assert seen, "the rewards were never called"
    from grpo_core.run_folder.layout import METRICS_FILE, read_jsonl

    metrics = read_jsonl(tmp_path / "run" / METRICS_FILE)[-1]
    facts = seen[-1]["facts"]
    assert metrics["tools/call_frequency"] == pytest.approx(sum(f["tool_calls"] for f in facts) / len(facts))
    assert metrics["tools/turns_mean"] == pytest.approx(sum(f["turns"] for f in facts) / len(facts))
    assert metrics["tools/model_seconds"] > 0
    from grpo_core.run_folder.layout import SAMPLES_FILE

    sample = read_jsonl(tmp_path / "run" / SAMPLES_FILE)[0]
    assert set(sample["tools"]) == {"turns", "tool_calls", "tool_errors", "stop"}
    first = seen[0]
    assert all(isinstance(c, list) and c[0]["role"] == "assistant" for c in first["completions"])
    assert first["num_turns"] == [sum(m["role"] == "assistant" for m in c) for c in first["completions"]]
    assert first["num_tool_calls"] == [f["tool_calls"] for f in first["facts"]]
    assert first["num_tool_errors"] == [f["tool_errors"] for f in first["facts"]]
    for calls, completion, facts in zip(first["num_tool_calls"], first["completions"], first["facts"], strict=True):
        answered = sum(m["role"] == "tool" for m in completion)
        assert answered == calls or facts["stop"] == "context"  # a row out of room keeps its last answers out
    assert sum(first["num_tool_calls"]) > 0


def test_trls_api_takes_tools_and_max_tool_calling_iterations(tool_model_dir, tmp_path, use_core_registry):
    """``GRPOTrainer(..., tools=[functions], args=GRPOConfig(max_tool_calling_iterations=...))`` as in TRL 1.16;
    an ``environment_factory`` whose environments have no ``reset`` is refused in one line."""
    import trl

    from grpo_core.api import GRPOTrainer
    from grpo_rewards.errors import UserError

    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: what to look up
        """
        return key.upper()

    rows = [{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS]
    args = trl.GRPOConfig(output_dir=str(tmp_path / "run"), use_cpu=True, report_to="none", num_generations=4,
                          per_device_train_batch_size=8, max_completion_length=64, max_tool_calling_iterations=2,
                          max_steps=1)
    trainer = GRPOTrainer(model=str(tool_model_dir), reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                          train_dataset=rows, args=args, tools=[lookup])
    assert trainer.cfg.tools.max_tool_calling_iterations == 2
    assert [s["function"]["name"] for s in trainer.backend.tool_schemas] == ["lookup"]
    assert '"name": "lookup"' in trainer.prompts[0]
    with pytest.raises(UserError, match="environment_factory"):
        GRPOTrainer(model=str(tool_model_dir), reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                    train_dataset=rows, args=args, environment_factory=object)
