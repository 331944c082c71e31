"""Chunked log-probabilities: parity with the full-logits path (values, entropy, gradients) for odd chunk
sizes and temperatures, on the bare kernel and through real tiny HF models (tied/untied heads, peft LoRA,
left padding), the plain-path fallback, and the guarantee that no ``[N, V]`` tensor is ever created."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import grpo_core.policy.logprobs as lp
from grpo_core.policy.logprobs import (
    chunked_token_logprobs,
    completion_logprobs,
    lm_parts,
    plain_completion_logprobs,
)


def _reference(h, w, b, t, temperature):
    z = h.double() @ w.double().t()
    if b is not None:
        z = z + b.double()
    z = z / temperature
    logp = z.log_softmax(-1)
    return logp.gather(1, t[:, None]).squeeze(1), -(logp.exp() * logp).sum(-1)


@pytest.fixture
def small_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force several vocabulary slices per tile (floor 256) so the online logsumexp really runs."""
    monkeypatch.setattr(lp, "TILE_VALUES", 256)


@pytest.mark.parametrize("chunk_size", [1, 7, 33, 1024])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("with_bias", [False, True])
def test_kernel_values_and_hidden_grad_match_full_logits(small_tiles, chunk_size, temperature, with_bias):
    torch.manual_seed(chunk_size)
    n, hdim, vocab = 45, 24, 1001  # vocab: 3 full slices of 256 and an odd tail
    h = torch.randn(n, hdim, requires_grad=True)
    w = torch.randn(vocab, hdim) * 0.5
    b = torch.randn(vocab) if with_bias else None
    t = torch.randint(0, vocab, (n,))
    t[0], t[1] = 0, vocab - 1  # first and last vocabulary slots
    logps, ent = chunked_token_logprobs(h, w, b, t, temperature=temperature, chunk_size=chunk_size, with_entropy=True)
    ref_lp, ref_ent = _reference(h, w, b, t, temperature)
    assert logps.dtype == torch.float32 and logps.shape == (n,)
    torch.testing.assert_close(logps.double(), ref_lp, rtol=0, atol=2e-5)
    torch.testing.assert_close(ent.double(), ref_ent, rtol=0, atol=2e-5)
    g = torch.randn(n)
    (gh,) = torch.autograd.grad((logps * g).sum(), [h])
    (ref_gh,) = torch.autograd.grad((ref_lp * g.double()).sum(), [h])
    torch.testing.assert_close(gh, ref_gh, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("head_trainable", [False, True])
def test_bf16_head_matches_its_bf16_logits(small_tiles, head_trainable):
    """bf16 weights: each tile's GEMM runs in bf16 (like the plain head), folded in fp32."""
    torch.manual_seed(3)
    n, hdim, vocab = 21, 16, 700
    h = torch.randn(n, hdim).bfloat16().requires_grad_()
    w = (torch.randn(vocab, hdim) * 0.5).bfloat16().requires_grad_(head_trainable)
    b = torch.randn(vocab).bfloat16()
    t = torch.randint(0, vocab, (n,))
    logps, _ = chunked_token_logprobs(h, w, b, t, temperature=0.8, chunk_size=8)
    z = (h @ w.t() + b).float() / 0.8  # the plain path's logits
    ref = z.log_softmax(-1).gather(1, t[:, None]).squeeze(1)
    torch.testing.assert_close(logps, ref, rtol=0, atol=1e-4)
    grads = torch.autograd.grad(logps.sum(), [h, w] if head_trainable else [h])
    ref_grads = torch.autograd.grad(ref.sum(), [h, w] if head_trainable else [h])
    for got, want in zip(grads, ref_grads, strict=True):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("chunk_size", [5, 64])
@pytest.mark.parametrize("temperature", [1.0, 1.3])
def test_kernel_weight_and_bias_grads_when_head_is_trainable(small_tiles, chunk_size, temperature):
    torch.manual_seed(1)
    n, hdim, vocab = 23, 16, 700
    h = torch.randn(n, hdim, requires_grad=True)
    w = (torch.randn(vocab, hdim) * 0.5).requires_grad_()
    b = torch.randn(vocab, requires_grad=True)
    t = torch.randint(0, vocab, (n,))
    logps, _ = chunked_token_logprobs(h, w, b, t, temperature=temperature, chunk_size=chunk_size)
    ref_lp, _ = _reference(h, w, b, t, temperature)
    g = torch.randn(n)
    got = torch.autograd.grad((logps * g).sum(), [h, w, b])
    want = torch.autograd.grad((ref_lp * g.double()).sum(), [h, w, b])
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_frozen_head_gets_no_grad_and_no_grad_mode_keeps_nothing():
    h = torch.randn(6, 8, requires_grad=True)
    w = torch.randn(300, 8)
    t = torch.randint(0, 300, (6,))
    logps, ent = chunked_token_logprobs(h, w, None, t)
    assert ent is None and logps.requires_grad
    logps.sum().backward()
    assert h.grad is not None and w.grad is None
    with torch.no_grad():
        logps, _ = chunked_token_logprobs(h, w, None, t)
    assert not logps.requires_grad


def test_bad_arguments_are_rejected():
    h, w, t = torch.randn(2, 4), torch.randn(10, 4), torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_token_logprobs(h, w, None, t, chunk_size=0)
    with pytest.raises(ValueError, match="temperature"):
        chunked_token_logprobs(h, w, None, t, temperature=0.0)


class _LargestTensor(TorchDispatchMode):
    """Records the largest tensor any aten op produces while active."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(x, torch.Tensor):
                self.largest = max(self.largest, x.numel())
        return out


@pytest.mark.parametrize("head_trainable", [False, True])
def test_full_logits_never_exist_forward_or_backward(head_trainable):
    n, hdim, vocab, chunk = 256, 4, 4096, 16
    h = torch.randn(n, hdim, requires_grad=True)
    w = torch.randn(vocab, hdim, requires_grad=head_trainable)
    t = torch.randint(0, vocab, (n,))
    with _LargestTensor() as probe:
        logps, _ = chunked_token_logprobs(h, w, None, t, chunk_size=chunk, with_entropy=True)
        logps.sum().backward()
    assert probe.largest <= chunk * vocab < n * vocab // 8
    with _LargestTensor() as plain_probe:  # the probe does see a full-logits path
        torch.log_softmax(h @ w.t(), -1).gather(1, t[:, None]).sum().backward()
    assert plain_probe.largest >= n * vocab


# ---- through real models -------------------------------------------------------------------------


def _qwen2(vocab: int = 1000, tie: bool = True, seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=tie, attn_implementation="eager")
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # make the distribution far from uniform
        model.get_output_embeddings().weight.mul_(40.0)
    return model


def _batch(vocab: int, batch: int = 3, prompt: int = 6, completion: int = 11):
    torch.manual_seed(7)
    ids = torch.randint(0, vocab, (batch, prompt + completion))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # left padding on the first row
    mask[1, :1] = 0
    return ids, mask, completion


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _compare_paths(model, temperature, chunk_size, atol=2e-5):
    vocab = model.config.vocab_size
    ids, mask, k = _batch(vocab)
    weights = torch.randn(ids.shape[0], k)
    model.zero_grad()
    got, got_ent = completion_logprobs(model, ids, mask, k, temperature=temperature, chunk_size=chunk_size,
                                       with_entropy=True)
    (got * weights).sum().backward()
    got_grads = _grads(model)
    model.zero_grad()
    want, want_ent = plain_completion_logprobs(model, ids, mask, k, temperature=temperature, with_entropy=True)
    (want * weights).sum().backward()
    want_grads = _grads(model)
    assert got.shape == (ids.shape[0], k) and got_ent.shape == (ids.shape[0], k)
    torch.testing.assert_close(got, want, rtol=0, atol=atol)
    torch.testing.assert_close(got_ent, want_ent.detach(), rtol=0, atol=atol)
    assert got_grads.keys() == want_grads.keys() and got_grads
    for name in want_grads:
        scale = want_grads[name].abs().max().item()  # fp32 sums in another order: tolerance relative to the scale
        torch.testing.assert_close(got_grads[name], want_grads[name], rtol=1e-3, atol=1e-5 + 2e-6 * scale, msg=name)
    return got_grads


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize(("temperature", "chunk_size"), [(1.0, 5), (0.6, 13), (1.0, 4096)])
def test_full_finetune_model_matches_plain_path(small_tiles, tie, temperature, chunk_size):
    model = _qwen2(tie=tie)
    grads = _compare_paths(model, temperature, chunk_size)
    head = "model.embed_tokens.weight" if tie else "lm_head.weight"
    assert head in grads  # the (tied) head weight gradient is accumulated chunk by chunk


def test_peft_lora_model_matches_plain_path_and_head_stays_frozen(small_tiles):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(_qwen2(), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():  # non-zero B so the adapters change the output
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.05)
    backbone, head = lm_parts(model)
    assert not head.weight.requires_grad
    grads = _compare_paths(model, 0.9, 7)
    assert grads and all("lora_" in n for n in grads)
    with model.disable_adapter():  # the reference pass (adapter off) goes through the same chunked path
        ids, mask, k = _batch(model.config.vocab_size)
        with torch.no_grad():
            ref, _ = completion_logprobs(model, ids, mask, k, chunk_size=7)
            plain, _ = plain_completion_logprobs(model, ids, mask, k)
    torch.testing.assert_close(ref, plain, rtol=0, atol=2e-5)


def test_model_path_never_builds_batch_logits():
    model = _qwen2(vocab=3000)
    ids, mask, k = _batch(3000, batch=4, prompt=4, completion=60)
    with _LargestTensor() as probe:
        logps, _ = completion_logprobs(model, ids, mask, k, chunk_size=8)
        logps.sum().backward()
    assert probe.largest < ids.shape[0] * k * 3000 // 4
    with _LargestTensor() as plain_probe:
        plain_completion_logprobs(model, ids, mask, k)[0].sum().backward()
    assert plain_probe.largest >= ids.shape[0] * k * 3000


def _transformed_head_models():
    from transformers import (
        CohereConfig,
        CohereForCausalLM,
        Gemma2Config,
        Gemma2ForCausalLM,
        GraniteConfig,
        GraniteForCausalLM,
    )

    small = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                 num_key_value_heads=2)
    torch.manual_seed(0)
    yield "cohere", CohereForCausalLM(CohereConfig(**small, logit_scale=0.5))
    yield "granite", GraniteForCausalLM(GraniteConfig(**small, logits_scaling=4.0))
    # a tight cap so that tanh bends the logits, not only passes them through
    yield "gemma2", Gemma2ForCausalLM(Gemma2Config(**small, head_dim=8, final_logit_softcapping=0.3,
                                                   tie_word_embeddings=False, attn_implementation="eager"))


@pytest.mark.parametrize("name", ["cohere", "granite", "gemma2"])
@pytest.mark.parametrize("train_head", [False, True])
def test_scaled_and_softcapped_heads_are_folded_into_the_tiles(name, train_head):
    """Cohere's logit_scale, Granite's logits_scaling and Gemma 2's softcap: the chunked path (no full
    logits) gives the model's own log-probs and gradients, through both backward variants."""
    model = dict(_transformed_head_models())[name].float()
    assert lm_parts(model) is not None
    model.get_output_embeddings().weight.requires_grad_(train_head)
    ids, mask, k = _batch(300)
    got, got_ent = completion_logprobs(model, ids, mask, k, temperature=0.7, chunk_size=5, with_entropy=True)
    want, want_ent = plain_completion_logprobs(model, ids, mask, k, temperature=0.7, with_entropy=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_ent, want_ent, atol=1e-5, rtol=1e-5)
    params = [p for p in model.parameters() if p.requires_grad]
    g1 = torch.autograd.grad((got * torch.randn_like(got, generator=torch.Generator().manual_seed(1))).sum(), params)
    g2 = torch.autograd.grad((want * torch.randn_like(want, generator=torch.Generator().manual_seed(1))).sum(),
                             params)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert lp.check_chunked_head(model, ids[:1])


def test_an_unknown_head_transform_is_caught_at_load_and_falls_back_loudly():
    """A model that changes its logits in a way no config key names: the load-time check sees the chunked
    log-probs differ from the model's own, warns, and the model takes the full-logits path."""
    from transformers import Qwen2ForCausalLM

    class Doubled(Qwen2ForCausalLM):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = out.logits * 2.0
            return out

    torch.manual_seed(0)
    model = Doubled(_qwen2().config)
    ids, mask, k = _batch(1000)
    with pytest.warns(UserWarning, match="differ from its own logits"):
        assert not lp.check_chunked_head(model, ids[:1])
    assert lm_parts(model) is None
    lp._warned.clear()
    with pytest.warns(UserWarning, match="full-logits path"):
        got, _ = completion_logprobs(model, ids, mask, k)
    torch.testing.assert_close(got, plain_completion_logprobs(model, ids, mask, k)[0])


def test_minus_infinity_logits_give_a_finite_entropy():
    """Masked vocabulary entries (-inf logits) contribute 0 to the entropy, on both paths."""
    hidden, weight = torch.randn(6, 8), torch.randn(40, 8)
    bias = torch.zeros(40)
    bias[10:20] = float("-inf")
    targets = torch.randint(0, 10, (6,))
    _, ent = chunked_token_logprobs(hidden, weight, bias, targets, chunk_size=4, with_entropy=True)
    plain = lp.entropy_from_logits(hidden @ weight.t() + bias)
    assert torch.isfinite(ent).all() and torch.isfinite(plain).all()
    torch.testing.assert_close(ent, plain, atol=1e-5, rtol=1e-5)


def test_logits_to_keep_out_of_range_is_a_clear_error():
    model = _qwen2()
    ids, mask, _ = _batch(1000)
    with pytest.raises(ValueError, match="logits_to_keep"):
        completion_logprobs(model, ids, mask, ids.shape[1])
