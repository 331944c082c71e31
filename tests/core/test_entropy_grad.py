"""The chunked head's differentiable entropy (``entropy_grad``, what the entropy bonus trains through): values and
gradients equal to autograd through a plain ``log_softmax`` of the full logits on random tensors (fp32, 1e-5), for
a frozen and a trainable head, a scaled and softcapped head, a temperature and masked (-inf) vocabulary; equal to
TRL's own ``entropy_from_logits`` and to TRL's fused head (``trl.kernels.ChunkedLogProbFunction``); and without
``entropy_grad`` the entropy stays a plain number that costs the backward nothing."""

from __future__ import annotations

import pytest
import torch

import grpo_core.policy.logprobs as lp
from grpo_core.policy.logprobs import chunked_token_logprobs, completion_logprobs, plain_completion_logprobs

ATOL = 1e-5


@pytest.fixture
def small_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several vocabulary slices per tile (floor 256), so the online logsumexp and the tiled backward really run."""
    monkeypatch.setattr(lp, "TILE_VALUES", 256)


def _plain(h, w, b, t, temperature, scale=1.0, softcap=None):
    """Log-prob of the target and entropy through the full logits, by autograd."""
    z = h @ w.t()
    if b is not None:
        z = z + b
    z = z * scale
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    logp = (z / temperature).log_softmax(-1)
    p = logp.exp()
    return logp.gather(1, t[:, None]).squeeze(1), -torch.where(p > 0, p * logp, 0.0).sum(-1)


def _tensors(seed, n=37, hdim=16, vocab=700, bias=True, masked=False):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, hdim, generator=g)
    w = torch.randn(vocab, hdim, generator=g) * 0.4
    b = torch.randn(vocab, generator=g) * 0.3 if bias else None
    if masked:  # a masked vocabulary: logits of -inf, never drawn
        b[vocab - 50:] = float("-inf")
    t = torch.randint(0, vocab - 50, (n,), generator=g)
    t[0] = 0
    return h, w, b, t, g


@pytest.mark.parametrize("trainable_head", [False, True])
@pytest.mark.parametrize("temperature,scale,softcap,chunk", [(1.0, 1.0, None, 1024), (0.7, 1.0, None, 5),
                                                             (0.9, 0.5, 3.0, 8)])
@pytest.mark.parametrize("grads", ["both", "entropy"])
def test_entropy_and_logprob_gradients_match_autograd_through_full_logits(small_tiles, trainable_head, temperature,
                                                                          scale, softcap, chunk, grads):
    h, w, b, t, g = _tensors(len(grads) * 7 + chunk)
    h.requires_grad_(True)
    if trainable_head:
        w.requires_grad_(True)
        b.requires_grad_(True)
    ours_lp, ours_h = chunked_token_logprobs(h, w, b, t, temperature=temperature, chunk_size=chunk,
                                             with_entropy=True, entropy_grad=True, scale=scale, softcap=softcap)
    ref_lp, ref_h = _plain(h, w, b, t, temperature, scale, softcap)
    torch.testing.assert_close(ours_lp, ref_lp, rtol=0, atol=ATOL)
    torch.testing.assert_close(ours_h, ref_h, rtol=0, atol=ATOL)
    assert ours_h.requires_grad and ref_h.std() > 0.05  # entropies that differ from token to token
    g_lp = torch.randn(t.shape, generator=g) if grads == "both" else torch.zeros(t.shape)
    g_h = torch.randn(t.shape, generator=g)
    inputs = [x for x in (h, w, b) if x.requires_grad]
    ours = torch.autograd.grad((ours_lp * g_lp).sum() + (ours_h * g_h).sum(), inputs)
    ref = torch.autograd.grad((ref_lp * g_lp).sum() + (ref_h * g_h).sum(), inputs)
    for a, r, name in zip(ours, ref, ("hidden", "weight", "bias"), strict=False):
        torch.testing.assert_close(a, r, rtol=0, atol=ATOL, msg=lambda m, name=name: f"{name}: {m}")
        assert r.abs().max() > 1e-3


def test_masked_vocabulary_gives_finite_entropy_gradients(small_tiles):
    h, w, b, t, g = _tensors(11, masked=True)
    h.requires_grad_(True)
    ours_lp, ours_h = chunked_token_logprobs(h, w, b, t, chunk_size=6, with_entropy=True, entropy_grad=True)
    # the reference: the vocabulary without its masked tail (whose probabilities are exactly 0)
    ref_lp, ref_h = _plain(h, w[:-50], b[:-50], t, 1.0)
    torch.testing.assert_close(ours_h, ref_h, rtol=0, atol=ATOL)
    g_h = torch.randn(t.shape, generator=g)
    (ours,) = torch.autograd.grad((ours_h * g_h).sum() + ours_lp.sum(), [h])
    (ref,) = torch.autograd.grad((ref_h * g_h).sum() + ref_lp.sum(), [h])
    assert torch.isfinite(ours).all()
    torch.testing.assert_close(ours, ref, rtol=0, atol=ATOL)


def test_entropy_equals_trls_entropy_from_logits_and_its_fused_head_gradients(small_tiles):
    trl_utils = pytest.importorskip("trl.trainer.utils")
    from trl.kernels import ChunkedLogProbFunction

    h, w, b, t, g = _tensors(5, bias=False)
    temperature = 0.8
    theirs = trl_utils.entropy_from_logits((h @ w.t()) / temperature)
    h.requires_grad_(True)
    w.requires_grad_(True)
    ours_lp, ours_h = chunked_token_logprobs(h, w, None, t, temperature=temperature, chunk_size=9,
                                             with_entropy=True, entropy_grad=True)
    torch.testing.assert_close(ours_h.detach(), theirs, rtol=0, atol=ATOL)
    # TRL's fused LM head (its torch tiles on a CPU): log-probs, entropy and both gradients
    h2, w2 = h.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    trl_lp, trl_h, *_ = ChunkedLogProbFunction.apply(h2, w2, None, t, temperature, 256, None, 1.0,
                                                     ("log_probs", "entropy"))
    torch.testing.assert_close(ours_lp, trl_lp, rtol=0, atol=ATOL)
    torch.testing.assert_close(ours_h, trl_h, rtol=0, atol=ATOL)
    g_lp, g_h = torch.randn(t.shape, generator=g), torch.randn(t.shape, generator=g)
    ours = torch.autograd.grad((ours_lp * g_lp).sum() - (ours_h * g_h).sum(), [h, w])
    trl = torch.autograd.grad((trl_lp * g_lp).sum() - (trl_h * g_h).sum(), [h2, w2])
    for a, r in zip(ours, trl, strict=True):
        torch.testing.assert_close(a, r, rtol=0, atol=ATOL)


def test_without_entropy_grad_the_entropy_is_a_plain_number(small_tiles):
    """The default path: the entropy (metrics, the token mask) carries no gradient and the frozen-head backward
    stays the one-multiply precomputed one."""
    h, w, b, t, _ = _tensors(3)
    h.requires_grad_(True)
    logps, entropy = chunked_token_logprobs(h, w, b, t, chunk_size=7, with_entropy=True)
    assert logps.requires_grad and not entropy.requires_grad
    assert logps.grad_fn.precompute  # no tile kept or recomputed for the backward
    _, entropy = chunked_token_logprobs(h, w, b, t, chunk_size=7, with_entropy=True, entropy_grad=True)
    assert entropy.requires_grad and not entropy.grad_fn.precompute


def test_model_paths_give_a_differentiable_entropy_only_when_asked(small_tiles):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32))
    ids = torch.randint(0, 300, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    ours_lp, ours_h = completion_logprobs(model, ids, mask, 4, temperature=0.7, with_entropy=True, entropy_grad=True)
    ref_lp, ref_h = plain_completion_logprobs(model, ids, mask, 4, temperature=0.7, with_entropy=True,
                                              entropy_grad=True)
    torch.testing.assert_close(ours_h, ref_h, rtol=0, atol=ATOL)
    weights = [p for p in model.parameters()]
    ours = torch.autograd.grad(ours_h.sum() + ours_lp.sum(), weights, allow_unused=True)
    ref = torch.autograd.grad(ref_h.sum() + ref_lp.sum(), weights, allow_unused=True)
    for a, r in zip(ours, ref, strict=True):
        if r is not None:
            torch.testing.assert_close(a, r, rtol=0, atol=ATOL)
    _, plain_h = plain_completion_logprobs(model, ids, mask, 4, with_entropy=True)
    _, chunked_h = completion_logprobs(model, ids, mask, 4, with_entropy=True)
    assert not plain_h.requires_grad and not chunked_h.requires_grad
