"""What a real checkpoint exposes, on tiny models: position ids on left-padded rows, the checkpoint's
generation config kept out of sampling, end-of-turn tokens, pad == EOS, dropout, over-long prompts, the
logged dapo loss, per-step peak memory, fp16 loss scaling and what a saved model persists."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.core.conftest import build_tiny_model, build_tokenizer  # noqa: E402


def _cfg(model_dir: Path, tmp_path: Path, prompts: list[str] | None = None, **sections) -> dict:
    data = tmp_path / "rows.jsonl"
    prompts = prompts or ["What is 12 plus 7?", "Natalia sold clips to 48 of her friends in April."]
    data.write_text("".join(json.dumps({"prompt": p, "answer": "19"}) + "\n" for p in prompts))
    cfg = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": str(data), "shuffle": False, "max_prompt_length": 64},
        "generation": {"num_generations": 4, "max_completion_length": 8},
        "grpo": {"max_steps": 1, "prompts_per_step": 2, "learning_rate": 1e-3},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"len": {"use": "core_len"}},
    }
    for name, values in sections.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    return cfg


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    """A tiny GPT-2 (learned absolute positions, dropout 0.1 everywhere) with the test tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = build_tokenizer()
    out = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=2, n_head=4,
                        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    GPT2LMHeadModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_attention_dropout_of_a_llama_is_off_too(tmp_path, use_core_registry):
    """Llama-style attention passes ``self.attention_dropout`` (a float read from the config at build time)
    to the kernel: it is zeroed on the module, the config keeps its value."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from grpo_core.config import config_from_dict
    from grpo_core.policy.logprobs import completion_logprobs
    from grpo_core.policy.models import load_model_and_tokenizer

    tok = build_tokenizer()
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                 attention_dropout=0.5, attn_implementation="eager")).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    model, _ = load_model_and_tokenizer(config_from_dict(_cfg(tmp_path / "m", tmp_path)))
    assert model.config.attention_dropout == 0.5
    ids = torch.randint(3, 200, (2, 16))
    with torch.no_grad():
        a, _ = completion_logprobs(model, ids, torch.ones_like(ids), 8)
        b, _ = completion_logprobs(model, ids, torch.ones_like(ids), 8)
    assert torch.equal(a, b)


def test_left_padding_does_not_move_positions(gpt2_dir):
    """A row's log-probs are the same alone and left-padded in a batch (GPT-2's positions are absolute)."""
    from transformers import AutoModelForCausalLM

    from grpo_core.policy.logprobs import completion_logprobs, plain_completion_logprobs

    model = AutoModelForCausalLM.from_pretrained(gpt2_dir).eval()
    ids = torch.randint(3, 200, (1, 12))
    padded = torch.cat([torch.zeros(1, 5, dtype=torch.long), ids], 1)
    mask = torch.cat([torch.zeros(1, 5, dtype=torch.long), torch.ones(1, 12, dtype=torch.long)], 1)
    with torch.no_grad():
        for fn in (completion_logprobs, plain_completion_logprobs):
            alone, _ = fn(model, ids, torch.ones_like(ids), 6)
            batched, _ = fn(model, padded, mask, 6)
            torch.testing.assert_close(batched, alone, atol=1e-5, rtol=0)


def test_dropout_is_off_in_the_loaded_policy(gpt2_dir, tmp_path, use_core_registry):
    """Two train-mode passes over the same batch give the same log-probs: GRPO's ratio is exactly 1 on
    unchanged weights (mu > 1), as with TRL's disable_dropout."""
    from grpo_core.config import config_from_dict
    from grpo_core.policy.logprobs import completion_logprobs
    from grpo_core.policy.models import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(config_from_dict(_cfg(gpt2_dir, tmp_path)))
    assert model.training and model.config.attn_pdrop == 0.1  # the config (what a save writes) is untouched
    ids = torch.randint(3, 200, (2, 16))
    with torch.no_grad():
        a, _ = completion_logprobs(model, ids, torch.ones_like(ids), 8)
        b, _ = completion_logprobs(model, ids, torch.ones_like(ids), 8)
    assert torch.equal(a, b)


@pytest.fixture(scope="module")
def leaky_dir(tmp_path_factory):
    """A tiny Llama whose generation_config.json sets min_p = 0.999 (only the top token survives)."""
    from transformers import GenerationConfig

    tok = build_tokenizer()
    out = build_tiny_model(tmp_path_factory.mktemp("leaky"), tok)
    GenerationConfig(min_p=0.999, do_sample=True, eos_token_id=tok.eos_token_id).save_pretrained(out)
    return out


def test_checkpoint_generation_config_does_not_reach_the_sampler(leaky_dir, tmp_path, use_core_registry):
    from grpo_core.config import config_from_dict
    from grpo_core.generation.transformers_backend import TransformersBackend
    from grpo_core.policy.models import load_model_and_tokenizer

    cfg = config_from_dict(_cfg(leaky_dir, tmp_path, generation={"num_generations": 8, "temperature": 1.0}))
    model, tok = load_model_and_tokenizer(cfg)
    assert model.generation_config.min_p == 0.999
    backend = TransformersBackend(cfg, model, tok)
    torch.manual_seed(0)
    batch = backend.generate(["What is 12 plus 7?"], 8)
    # min_p = 0.999 would make all eight identical (greedy); the policy at temperature 1 is not
    assert len({tuple(r.tolist()) for r in batch.completion_ids}) > 1
    assert model.generation_config.min_p == 0.999  # put back: the saved model keeps it


def test_sampler_settings_that_leave_the_policy_are_warned(tiny_model_dir, tmp_path, use_core_registry):
    from grpo_core.config import config_from_dict
    from grpo_core.generation.transformers_backend import TransformersBackend
    from grpo_core.policy.models import load_model_and_tokenizer

    plain = config_from_dict(_cfg(tiny_model_dir, tmp_path))
    model, tok = load_model_and_tokenizer(plain)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TransformersBackend(plain, model, tok)
    cfg = config_from_dict(_cfg(tiny_model_dir, tmp_path, generation={"top_p": 0.9, "top_k": 20,
                                                                      "repetition_penalty": 1.1}))
    with pytest.warns(UserWarning, match="off-policy") as caught:
        TransformersBackend(cfg, model, tok)
    assert {str(w.message).split(" =")[0] for w in caught} == {
        "generation.top_p", "generation.top_k", "generation.repetition_penalty"}


def test_end_of_turn_token_of_the_chat_template_ends_completions(tmp_path):
    """A template closing turns with <|end|> (not the tokenizer's EOS) stops generation there too."""
    from grpo_core.generation.transformers_backend import end_of_turn_ids, eos_token_ids

    tok = build_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|end|>"]})
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>\n{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    end = tok.convert_tokens_to_ids("<|end|>")
    assert end != tok.eos_token_id
    assert end_of_turn_ids(tok) == [end]

    class Model:
        generation_config = None

    assert set(eos_token_ids(Model(), tok)) == {end, tok.eos_token_id}
    tok.chat_template = None
    assert end_of_turn_ids(tok) == []


def test_pad_equal_to_eos_keeps_the_eos_in_the_completion():
    from grpo_core.generation.transformers_backend import completion_mask_from_eos

    eos = pad = 2
    ids = torch.tensor([[5, 6, eos, pad, pad], [7, eos, pad, pad, pad], [5, 5, 5, 5, 5]])
    mask, truncated = completion_mask_from_eos(ids, [eos])
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]
    assert truncated.tolist() == [False, False, True]


LONG = "word " * 80


@pytest.mark.parametrize("policy", ["drop", "error", "truncate"])
def test_overlong_prompts_are_reported_at_load(tiny_model_dir, tmp_path, use_core_registry, policy):
    from grpo_core.trainer import Trainer

    cfg = _cfg(tiny_model_dir, tmp_path, prompts=["What is 12 plus 7?", LONG, "What is 1 plus 1?"],
               data={"overlong_prompts": policy, "max_prompt_length": 32})
    if policy == "error":
        with pytest.raises(ValueError, match=r"data.max_prompt_length: 1 of 3 training prompts are longer than 32"):
            Trainer(cfg)
        return
    with pytest.warns(UserWarning, match=r"1 of 3 training prompts are longer than 32 tokens"):
        trainer = Trainer(cfg)
    assert len(trainer.prompts) == (2 if policy == "drop" else 3)
    assert all("word word" not in p for p in trainer.prompts) == (policy == "drop")


def test_dapo_logged_loss_does_not_depend_on_gradient_accumulation():
    from grpo_core.algorithm.loss import grpo_loss

    torch.manual_seed(0)
    lp, mask, adv = torch.randn(8, 5) * 0.1 - 2, torch.ones(8, 5), torch.randn(8)
    old = lp + 0.05 * torch.randn(8, 5)
    whole = grpo_loss(lp, mask, adv, old_per_token_logps=old, loss_type="dapo", num_items_in_batch=mask.sum())[1]
    parts = [grpo_loss(lp[i:i + 4], mask[i:i + 4], adv[i:i + 4], old_per_token_logps=old[i:i + 4], loss_type="dapo",
                       num_items_in_batch=mask.sum(), grad_accum_steps=2)[1]["loss"] for i in (0, 4)]
    # the trainer logs the mean over micro-batches
    torch.testing.assert_close(sum(parts) / 2, whole["loss"])


def test_peak_memory_is_per_step():
    from grpo_core.trainer import peak_memory_since_reset_gb, reset_peak_memory

    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("per-step peak RSS needs Linux's /proc/self/clear_refs")
    big = torch.ones(256 * 2**20 // 4)  # 256 MiB touched
    big.add_(1)
    high = peak_memory_since_reset_gb("cpu")
    del big
    reset_peak_memory("cpu")
    low = peak_memory_since_reset_gb("cpu")
    assert high - low > 0.2  # the 256 MiB of the earlier "step" no longer counts


def test_fp16_training_scales_the_loss(tiny_model_dir, tmp_path, use_core_registry):
    from grpo_core.trainer import Trainer

    fp16 = Trainer(_cfg(tiny_model_dir, tmp_path, model={"dtype": "float16"}, lora={"enabled": True, "r": 4}))
    assert fp16.scaler.is_enabled()
    before = [p.detach().clone() for p in fp16.params]
    summary = fp16.train()  # one scaled step: finite, and the adapters moved
    assert summary["step"] == 1 and math.isfinite(summary["grad_norm"])
    assert any(not torch.equal(a, p) for a, p in zip(before, fp16.params, strict=True))
    fp32 = Trainer(_cfg(tiny_model_dir, tmp_path, lora={"enabled": True, "r": 4}))
    assert not fp32.scaler.is_enabled()


def test_saved_model_is_published_with_cache_on_and_the_original_padding_side(tiny_model_dir, tmp_path,
                                                                              use_core_registry):
    from transformers import AutoConfig, AutoTokenizer

    from grpo_core.config import config_from_dict
    from grpo_core.policy.models import load_model_and_tokenizer, save_model

    cfg = config_from_dict(_cfg(tiny_model_dir, tmp_path, model={"gradient_checkpointing": True},
                                lora={"enabled": True, "r": 4}))
    model, tok = load_model_and_tokenizer(cfg)
    assert model.get_base_model().config.use_cache is False and tok.padding_side == "left"
    tok(["a", "a longer prompt"], padding=True)  # as generation does: a fast tokenizer remembers it
    out = save_model(model, tok, tmp_path / "merged", merged=True)
    assert AutoConfig.from_pretrained(out).use_cache is True
    assert AutoTokenizer.from_pretrained(out).padding_side == "right"
    assert model.get_base_model().config.use_cache is False and tok.padding_side == "left"  # training goes on
    assert all(p.device.type == "cpu" for p in model.parameters())


def test_group_sampling_matches_generate_greedy_with_rows_finishing_early(tiny_model_dir):
    """Prefill once per prompt, cache shared by the group, finished rows dropped: greedy decoding gives
    exactly ``model.generate``'s tokens, for rows that stop at different steps too."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_core.generation.group_sampling import sample_groups

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir, padding_side="left")
    enc = tok(["What is 12 plus 7?", "Natalia sold clips", "The answer is"], return_tensors="pt", padding=True)
    assert (enc["attention_mask"] == 0).any()
    ref = model.generate(**enc, do_sample=False, max_new_tokens=10, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id)[:, enc["input_ids"].size(1):]
    stop = int(ref[0, 2])  # a token row 0 emits at step 3: it stops there, the others (maybe) later
    want = model.generate(**enc, do_sample=False, max_new_tokens=10, pad_token_id=tok.pad_token_id,
                          eos_token_id=[stop])[:, enc["input_ids"].size(1):]
    got, logps = sample_groups(model, enc["input_ids"], enc["attention_mask"], 2, max_new_tokens=10,
                               eos_ids=[stop], pad_id=tok.pad_token_id, greedy=True)
    want = want.repeat_interleave(2, dim=0)
    assert got.shape == want.shape
    for row_got, row_want in zip(got, want, strict=True):
        n = int((row_want == stop).int().argmax()) + 1 if (row_want == stop).any() else len(row_want)
        assert row_got[:n].tolist() == row_want[:n].tolist()
    assert (logps <= 0).all()


@pytest.mark.parametrize("decode", ["dynamic", "static"])
def test_sampled_log_probs_are_the_trainers(tiny_model_dir, tmp_path, use_core_registry, decode):
    """Temperature 0.7, left-padded prompts: the trainer's log-probs of the sampled tokens equal the
    sampler's own (the on-policy assumption), through the shared-prefill sampler, over the model's own cache
    or a static one."""
    from grpo_core.config import config_from_dict
    from grpo_core.generation.transformers_backend import TransformersBackend
    from grpo_core.policy.logprobs import completion_logprobs
    from grpo_core.policy.models import load_model_and_tokenizer

    cfg = config_from_dict(_cfg(tiny_model_dir, tmp_path, generation={"temperature": 0.7, "decode": decode}))
    model, tok = load_model_and_tokenizer(cfg)
    backend = TransformersBackend(cfg, model, tok)
    assert backend.decode == decode
    torch.manual_seed(0)
    batch = backend.generate(["What is 12 plus 7?", "Natalia sold clips to 48 of her friends"], 3)
    assert batch.sampling_logps is not None and (batch.prompt_mask == 0).any()
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    attn = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    with torch.no_grad():
        ours, _ = completion_logprobs(model, ids, attn, batch.completion_ids.size(1), temperature=0.7)
    mask = batch.completion_mask.bool()
    assert (ours - batch.sampling_logps)[mask].abs().max() < 1e-4


def test_conversational_rows_give_rewards_chat_messages_as_trl_does(tiny_model_dir, tmp_path):
    """Prompts given as chat messages: each reward receives ``[{"role": "assistant", "content": text}]`` per
    completion and the prompt messages (trl 1.16.0 grpo_trainer.py: ``completions = [[{"role": "assistant",
    "content": content}] for content in contents]`` when ``is_conversational``); plain prompts get text."""
    from grpo_core.trainer import Trainer
    from grpo_rewards import compose

    seen: list[tuple[list, list]] = []

    def spy(completions, prompts, **_):
        seen.append((completions, prompts))
        return [0.0] * len(completions)

    data = tmp_path / "chat.jsonl"
    messages = [{"role": "user", "content": "What is 12 plus 7?"}]
    data.write_text(json.dumps({"prompt": messages, "answer": "19"}) + "\n" + json.dumps(
        {"prompt": [{"role": "user", "content": "Name a number."}], "answer": "1"}) + "\n")
    cfg = _cfg(tiny_model_dir, tmp_path)
    cfg["data"]["source"] = str(data)
    cfg["rewards"] = compose({"spy": spy})
    trainer = Trainer(cfg)
    batch = trainer.backend.generate(trainer.prompts[:1], 4)
    trainer._score(trainer.rows[:1], batch)
    completions, prompts = seen[-1]
    assert completions == [[{"role": "assistant", "content": t}] for t in batch.completions_text]
    assert prompts == [messages] * 4
