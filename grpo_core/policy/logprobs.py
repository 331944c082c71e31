"""Per-token log-probabilities of completions under a causal LM, without ever holding the full logits.

INTERFACE (owned by the memory work, issue 5; the trainer calls only these):

``completion_logprobs(model, input_ids, attention_mask, logits_to_keep, *, temperature=1.0,
chunk_size=1024, with_entropy=False, entropy_grad=False) -> (logps [B, K], entropy [B, K] | None)``
    (``router_logits=True`` adds a third item, an MoE model's router logits)
    log p(token_t | tokens_<t) for the last ``K = logits_to_keep`` tokens of each row, with
    logits divided by ``temperature`` first (TRL's ``_get_per_token_logps_and_entropies``).
    Runs the model's backbone once, then :class:`ChunkedLogProbs` on the final hidden states.

``chunked_token_logprobs(hidden [N, H], weight [V, H], bias, targets [N], ...)``: the kernel itself.

Heads that transform the logits (Cohere's ``logit_scale``, Granite's ``logits_scaling``, Falcon-H1's
``lm_head_multiplier``, Gemma 2/3's ``final_logit_softcapping``) are folded into each tile:
``z = softcap * tanh(scale * (h W^T + b) / softcap)``, gradients through ``tanh`` included.
:func:`check_chunked_head` compares the kernel once with the model's own logits on a few tokens (the
trainer calls it at load); a model that fails, or whose head is not a plain linear map, takes the
full-logits path with a warning that says so. Logits of ``-inf`` (masked vocabulary) give entropy
terms of 0, not NaN.

``plain_completion_logprobs(...)``: same maths through full ``[B, K, V]`` logits (reference for tests).

How the kernel works: the logits are built one tile at a time (``chunk_size`` tokens x a vocabulary
slice sized so a tile holds ~8M values), folded into an fp32 online logsumexp (running max, rescaled
sum of exponentials, and the rescaled sum of ``e * z`` for the entropy); the target logit is gathered
from the tile that holds it. Nothing of size ``N x V`` is kept.

Gradients: ``d logp_i / d h_i = (W[t_i] - E_p[W]) / T`` does not depend on the upstream gradient
except through the per-token scalar ``g_i``. So when only the hidden states need a gradient (LoRA: the
head is frozen), the forward accumulates ``E_p[W] = softmax(z) @ W`` tile by tile as well (the same GEMM
count as a plain backward, Liger-style) and the backward is one multiply; no tile is recomputed. When the
head weight (or bias) is trainable, the backward recomputes each tile's softmax from the saved
logsumexp and accumulates ``grad_W`` (and ``grad_h``) chunk by chunk in fp32.

The entropy output is non-differentiable unless ``entropy_grad`` asks for its gradient (the entropy bonus,
``[grpo] entropy_coef``): then the backward recomputes each tile whatever needs a gradient and combines both
upstream gradients in it, ``dz_j = g (1[j = target] - p_j) - g_H p_j (log p_j + H)`` (TRL's fused head does the
same), so no ``N x V`` tensor is kept either way. Without it (metrics, the high-entropy token mask), the entropy
costs one more running sum in the forward and nothing in the backward.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import torch

from grpo_core.policy import shared_prompts
from grpo_core.policy.fp32_head import FP32_HEAD
from grpo_core.policy.shared_prompts import position_ids_from_mask

# Values per logits tile (fp32): 4M values = 16 MiB; a tile and its exponentials stay ~32 MiB.
TILE_VALUES = 1 << 22


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[..., index] (the plain path; builds a second full-size tensor)."""
    return torch.gather(logits.float().log_softmax(-1), -1, index.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    logp = logits.float().log_softmax(-1)
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(-1)  # -inf logits: 0 * -inf is 0 here


def vocab_chunk_for(chunk_size: int, vocab_size: int) -> int:
    """Vocabulary slice per tile so that ``chunk_size x slice`` stays near :data:`TILE_VALUES`."""
    return max(256, min(vocab_size, TILE_VALUES // max(1, chunk_size)))


def _tile_logits(
    h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, v0: int, v1: int, inv_t: float,
    out: torch.Tensor | None = None, scale: float = 1.0, softcap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """fp32 ``head(h @ W[v0:v1]^T + b) / T`` for one tile (GEMM in the weights' dtype, like the plain head),
    written into ``out`` (a reused fp32 buffer) when given; ``head`` is ``x * scale``, then
    ``softcap * tanh(x / softcap)``. Also returns ``1 - tanh^2`` (the softcap's derivative) or None."""
    direct = out is not None and weight.dtype == torch.float32 and h.dtype == torch.float32
    z = torch.mm(h, weight[v0:v1].t(), out=out if direct else None)
    if bias is not None:
        z.add_(bias[v0:v1])
    if out is not None and not direct:
        z = out.copy_(z)
    z = z.float()
    if scale != 1.0:
        z.mul_(scale)
    slope = None
    if softcap is not None:
        z.div_(softcap).tanh_()
        slope = 1.0 - z * z
        z.mul_(softcap)
    if inv_t != 1.0:
        z.mul_(inv_t)
    return z, slope


def _tile_buffer(rows: int, cols: int, like: torch.Tensor) -> torch.Tensor:
    """One fp32 logits tile, allocated once per call and reused for every tile (no allocator churn)."""
    return torch.empty(rows, cols, device=like.device, dtype=torch.float32)


class ChunkedLogProbs(torch.autograd.Function):
    """``log_softmax(h @ W^T + b) / T)[target]`` (and the entropy) tile by tile; see the module docstring."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        temperature: float,
        chunk_size: int,
        with_entropy: bool,
        scale: float = 1.0,
        softcap: float | None = None,
        entropy_grad: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.set_materialize_grads(False)
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        entropy_grad = entropy_grad and with_entropy
        # Only the hidden states need a gradient, and only through the log-probs: fold it into the forward, keep no
        # tile for backward.
        precompute = need_h and not (need_w or need_b or entropy_grad)
        n_tok, vocab = hidden.shape[0], weight.shape[0]
        inv_t = 1.0 / temperature
        v_chunk = vocab_chunk_for(chunk_size, vocab)
        f32 = dict(device=hidden.device, dtype=torch.float32)
        lse = torch.empty(n_tok, **f32)
        target_z = torch.empty(n_tok, **f32)
        entropy = torch.empty(n_tok, **f32) if with_entropy else None
        grad_dir = torch.empty(n_tok, hidden.shape[1], **f32) if precompute else None
        z_buf = _tile_buffer(min(chunk_size, n_tok), min(v_chunk, vocab), hidden)
        e_buf = torch.empty_like(z_buf)
        for t0 in range(0, n_tok, chunk_size):
            t1 = min(t0 + chunk_size, n_tok)
            h, tg = hidden[t0:t1], targets[t0:t1]
            m = torch.full((t1 - t0,), float("-inf"), **f32)
            s = torch.zeros(t1 - t0, **f32)
            sz = torch.zeros(t1 - t0, **f32) if with_entropy else None
            ew = torch.zeros(t1 - t0, hidden.shape[1], **f32) if precompute else None
            tz = torch.zeros(t1 - t0, **f32)
            for v0 in range(0, vocab, v_chunk):
                v1 = min(v0 + v_chunk, vocab)
                z, slope = _tile_logits(h, weight, bias, v0, v1, inv_t, out=z_buf[: t1 - t0, : v1 - v0],
                                        scale=scale, softcap=softcap)
                local = tg - v0
                inside = (local >= 0) & (local < v1 - v0)
                picked = z.gather(1, local.clamp(0, v1 - v0 - 1).unsqueeze(1)).squeeze(1)
                tz = torch.where(inside, picked, tz)
                new_m = torch.maximum(m, z.amax(1))
                rescale = torch.exp(m - new_m)
                e = torch.sub(z, new_m.unsqueeze(1), out=e_buf[: t1 - t0, : v1 - v0]).exp_()
                s = s * rescale + e.sum(1)
                if ew is not None:
                    ew.mul_(rescale.unsqueeze(1)).addmm_(e if slope is None else e * slope, weight[v0:v1].float())
                if sz is not None:  # z is not needed after this; -inf logits (e = 0) add 0, not NaN
                    sz = sz * rescale + torch.where(e > 0, z.mul_(e), 0.0).sum(1)
                m = new_m
            lse[t0:t1] = m + torch.log(s)
            target_z[t0:t1] = tz
            if entropy is not None:
                entropy[t0:t1] = lse[t0:t1] - sz / s
            if grad_dir is not None:
                # d logp / d h = (c_t W[target] - E_p[c W]) * scale / T with c the softcap's slope (1 without),
                # waiting only for the upstream scalar.
                target_w = weight[tg].float()
                if softcap is not None:
                    target_w = target_w * (1.0 - (tz * temperature / softcap) ** 2).unsqueeze(1)
                grad_dir[t0:t1] = (target_w - ew / s.unsqueeze(1)) * (inv_t * scale)
        logps = target_z - lse
        ctx.precompute = precompute
        ctx.hidden_dtype = hidden.dtype
        ctx.shape = (temperature, chunk_size, v_chunk, scale, softcap)
        if precompute:
            ctx.save_for_backward(grad_dir)
        elif need_h or need_w or need_b:
            ctx.save_for_backward(hidden, weight, bias, targets, lse, entropy if entropy_grad else None)
        if entropy is None:
            entropy = logps.new_zeros(0)
        if not entropy_grad:
            ctx.mark_non_differentiable(entropy)
        return logps, entropy

    @staticmethod
    def backward(ctx: Any, grad_logps: torch.Tensor | None, grad_entropy: torch.Tensor | None):  # type: ignore[override]
        none = [None] * 10
        if ctx.precompute:  # the entropy is non-differentiable here
            if grad_logps is None:
                return tuple(none)
            (grad_dir,) = ctx.saved_tensors
            return ((grad_dir * grad_logps.float().unsqueeze(1)).to(ctx.hidden_dtype), *none[1:])
        hidden, weight, bias, targets, lse, entropy = ctx.saved_tensors
        if entropy is None:
            grad_entropy = None  # marked non-differentiable: nothing reaches it
        if grad_logps is None and grad_entropy is None:
            return tuple(none)
        g = grad_logps.float() if grad_logps is not None else lse.new_zeros(lse.shape)
        gh = grad_entropy.float() if grad_entropy is not None else None
        temperature, chunk_size, v_chunk, scale, softcap = ctx.shape
        inv_t = 1.0 / temperature
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        n_tok, vocab = hidden.shape[0], weight.shape[0]
        grad_h = torch.zeros(hidden.shape, device=hidden.device, dtype=torch.float32) if need_h else None
        grad_w = torch.zeros(weight.shape, device=weight.device, dtype=torch.float32) if need_w else None
        grad_b = torch.zeros(vocab, device=weight.device, dtype=torch.float32) if need_b else None
        z_buf = _tile_buffer(min(chunk_size, n_tok), min(v_chunk, vocab), hidden)
        for t0 in range(0, n_tok, chunk_size):
            t1 = min(t0 + chunk_size, n_tok)
            h, tg, gc = hidden[t0:t1], targets[t0:t1], g[t0:t1].unsqueeze(1)
            for v0 in range(0, vocab, v_chunk):
                v1 = min(v0 + v_chunk, vocab)
                z, slope = _tile_logits(h, weight, bias, v0, v1, inv_t, out=z_buf[: t1 - t0, : v1 - v0],
                                        scale=scale, softcap=softcap)
                if gh is None:
                    # dz = g * (onehot(target) - p) * scale * slope / T, in place over the tile
                    dz = z.sub_(lse[t0:t1].unsqueeze(1)).exp_().mul_(-gc)
                else:
                    # dz = g * onehot(target) - p * (g + g_H * (log p + H)); a -inf logit (p = 0) gives 0, not NaN
                    log_p = z.sub_(lse[t0:t1].unsqueeze(1))
                    p = log_p.exp()
                    inner = log_p.add_(entropy[t0:t1].unsqueeze(1)).mul_(gh[t0:t1].unsqueeze(1)).add_(gc)
                    dz = torch.where(p > 0, inner.mul_(p), 0.0).neg_()
                local = tg - v0
                inside = (local >= 0) & (local < v1 - v0)
                # + g at each row's target column when this tile holds it: a scatter, not boolean indexing (which
                # waits for the device to count the rows)
                dz.scatter_add_(1, local.clamp(0, v1 - v0 - 1).unsqueeze(1), gc * inside.unsqueeze(1))
                dz.mul_(inv_t * scale)
                if slope is not None:
                    dz.mul_(slope)
                if grad_h is not None:
                    grad_h[t0:t1] += torch.mm(dz, weight[v0:v1].float())
                if grad_w is not None:
                    grad_w[v0:v1] += torch.mm(dz.t(), h.float())
                if grad_b is not None:
                    grad_b[v0:v1] += dz.sum(0)
        return (
            grad_h.to(hidden.dtype) if grad_h is not None else None,
            grad_w.to(weight.dtype) if grad_w is not None else None,
            grad_b.to(bias.dtype) if grad_b is not None else None,
            *none[3:],
        )


def chunked_token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    with_entropy: bool = False,
    scale: float = 1.0,
    softcap: float | None = None,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-row ``log_softmax(head(hidden @ weight^T + bias) / temperature)[targets]`` in tiles, ``head``
    multiplying by ``scale`` then softcapping (``softcap * tanh(x / softcap)``) when ``softcap`` is set.

    ``hidden`` is ``[N, H]``, ``weight`` ``[V, H]``, ``targets`` ``[N]``. Returns fp32 ``logps [N]``
    and, with ``with_entropy``, the fp32 entropy ``[N]``: differentiable with ``entropy_grad``, else not.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logps, entropy = ChunkedLogProbs.apply(
        hidden, weight, bias, targets, float(temperature), int(chunk_size), bool(with_entropy), float(scale),
        None if softcap is None else float(softcap), bool(entropy_grad),
    )
    return logps, (entropy if with_entropy else None)


def plain_completion_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    router_logits: bool = False,
) -> tuple[Any, ...]:
    """Reference path: materialises ``[B, K, V]`` logits exactly as TRL did before its fused head (the entropy
    carries a gradient with ``entropy_grad``; ``router_logits``: as :func:`completion_logprobs`)."""
    router = {"output_router_logits": True} if router_logits else {}
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids_from_mask(attention_mask),
                logits_to_keep=logits_to_keep + 1, **router)
    logits = out.logits[:, :-1, :] / temperature
    targets = input_ids[:, -logits_to_keep:]
    logps = selective_log_softmax(logits, targets)
    entropy = entropy_from_logits(logits) if with_entropy else None
    if entropy is not None and not entropy_grad:
        entropy = entropy.detach()
    return (logps, entropy, out.router_logits) if router_logits else (logps, entropy)


# Config keys that change the logits after the head: key -> how it enters ``scale`` (softcapping apart).
_SCALES = {"logit_scale": lambda v: v, "lm_head_multiplier": lambda v: v, "output_multiplier": lambda v: v,
           "logits_scaling": lambda v: 1.0 / v}
_warned: set[str] = set()
PLAIN_FLAG = "_grpo_plain_logprobs"  # set on a model whose chunked head failed check_chunked_head


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, stacklevel=3)


def head_transform(model: torch.nn.Module) -> tuple[float, float | None]:
    """``(scale, softcap)`` the model applies to its head's output (see the module docs)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    scale = 1.0
    for key, fold in _SCALES.items():
        value = getattr(text, key, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1):
            scale *= fold(float(value))
    cap = getattr(text, "final_logit_softcapping", None)
    return scale, (float(cap) if cap else None)


def lm_parts(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Linear] | None:
    """``(backbone, lm_head)`` of a HF causal LM, peft-wrapped or not; None when the head is not a plain
    linear map of the backbone's last hidden state (LoRA on the head, a custom head) or the model failed
    :func:`check_chunked_head`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    get_head = getattr(base, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    backbone = getattr(base, "base_model", None)
    if head is None or backbone is None or backbone is base:
        return None
    if type(head) is not torch.nn.Linear:
        return None  # peft LoRA/modules_to_save wrapper on the head, or a custom head
    if getattr(base, PLAIN_FLAG, False):
        return None
    return backbone, head


def completion_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    with_entropy: bool = False,
    share_prompts: bool = False,
    completions_per_row: int | None = None,
    entropy_grad: bool = False,
    router_logits: bool = False,
) -> tuple[Any, ...]:
    """Default path used by the trainer: backbone once, then the chunked head (no ``[B, K, V]`` tensor).

    ``entropy_grad``: the entropy carries a gradient (the entropy bonus); otherwise it is a plain number
    (metrics, the high-entropy token mask) that costs the backward nothing.

    ``router_logits``: a Mixture-of-Experts model's router logits come back as a third item, one
    ``[B * (P + K), experts]`` tensor per MoE layer, with their gradient (the load-balancing loss,
    :mod:`grpo_core.policy.router_loss`); every row then runs with its own copy of its prompt, as the loss counts it.

    ``share_prompts``: rows that share a prompt run as packed rows with one copy of it where that is cheaper
    (grpo_core.policy.shared_prompts; ``completions_per_row`` forces that many completions per packed row).

    Falls back to :func:`plain_completion_logprobs` (with a one-time warning) for models whose head is
    not a plain linear layer over the backbone output or that failed :func:`check_chunked_head`.
    """
    if logits_to_keep < 1 or logits_to_keep >= input_ids.shape[1]:
        raise ValueError(f"logits_to_keep must be in [1, {input_ids.shape[1] - 1}], got {logits_to_keep}")
    parts = lm_parts(model)
    if parts is None:
        _warn_once(
            type(model).__name__,
            f"completion_logprobs: {type(model).__name__}: the chunked head is not used (no plain linear LM "
            "head over its backbone, or its logits differ from the model's own); using the full-logits path, "
            "which holds [batch, completion, vocab] logits",
        )
        return plain_completion_logprobs(model, input_ids, attention_mask, logits_to_keep, temperature=temperature,
                                         with_entropy=with_entropy, entropy_grad=entropy_grad,
                                         router_logits=router_logits)
    backbone, head = parts
    packing = None
    routers = None
    if share_prompts and not router_logits:
        packing = shared_prompts.plan(model, input_ids, attention_mask, logits_to_keep, per_row=completions_per_row)
    if packing is not None:
        hidden = shared_prompts.packed_hidden(model, backbone, packing).to(head.weight.device)
    else:
        router = {"output_router_logits": True} if router_logits else {}
        out = backbone(input_ids=input_ids, attention_mask=attention_mask,
                       position_ids=position_ids_from_mask(attention_mask), use_cache=False, **router)
        hidden = out.last_hidden_state[:, -(logits_to_keep + 1) : -1, :].to(head.weight.device)
        routers = out.router_logits if router_logits else None
    targets = input_ids[:, -logits_to_keep:].to(head.weight.device)
    batch = input_ids.shape[0]
    scale, softcap = head_transform(model)
    fp32_head = getattr(head, FP32_HEAD, False)  # [model] cast_lm_head_to_fp32: float32 operands, autocast off
    if fp32_head:
        hidden = hidden.float()
    with torch.autocast(hidden.device.type, enabled=False) if fp32_head else contextlib.nullcontext():
        logps, entropy = chunked_token_logprobs(
            hidden.reshape(-1, hidden.shape[-1]),
            head.weight,
            head.bias,
            targets.reshape(-1),
            temperature=temperature,
            chunk_size=chunk_size,
            with_entropy=with_entropy,
            scale=scale,
            softcap=softcap,
            entropy_grad=entropy_grad,
        )
    logps, entropy = logps.view(batch, -1), (entropy.view(batch, -1) if entropy is not None else None)
    return (logps, entropy, routers) if router_logits else (logps, entropy)


def check_chunked_head(model: torch.nn.Module, input_ids: torch.Tensor, *, tolerance: float = 1e-3) -> bool:
    """Compare the chunked path with the model's own logits on ``input_ids`` (``[1, T]``, a few tokens),
    once at load. On a mismatch (a head transform this module does not know), mark the model so that
    :func:`completion_logprobs` takes the full-logits path, warn, and return False."""
    if lm_parts(model) is None:
        return False
    ids = input_ids[:, :16].to(next(model.parameters()).device)
    if ids.shape[1] < 2:
        raise ValueError("check_chunked_head needs at least 2 tokens")
    mask = torch.ones_like(ids)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            ours, _ = completion_logprobs(model, ids, mask, ids.shape[1] - 1)
            theirs, _ = plain_completion_logprobs(model, ids, mask, ids.shape[1] - 1)
    finally:
        model.train(was_training)
    error = (ours - theirs).abs().max().item()
    if error <= tolerance * max(1.0, theirs.abs().max().item()):
        return True
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    setattr(base, PLAIN_FLAG, True)
    warnings.warn(f"completion_logprobs: {type(base).__name__}'s chunked log-probs differ from its own logits by "
                  f"{error:.3g} (an LM head transform this trainer does not fold in); using the full-logits path, "
                  "which holds [batch, completion, vocab] logits", stacklevel=2)
    return False


def check_shared_prompts(model: torch.nn.Module, input_ids: torch.Tensor, *, tolerance: float = 1e-3) -> bool:
    """Packed against unpacked log-probs on three completions of one prompt cut from ``input_ids`` (``[1, T]``,
    T >= 4), once at load. On a mismatch, mark the model so that packing stays off, warn, and return False."""
    if not shared_prompts.packable(model, 16):
        return False
    ids = input_ids[0, :16].to(next(model.parameters()).device)
    if ids.numel() < 4:
        raise ValueError("check_shared_prompts needs at least 4 tokens")
    half = ids.numel() // 2
    prompt, tail = ids[:half], ids[half:]
    rows = torch.stack([torch.cat([prompt, tail.roll(shift)]) for shift in range(3)])
    mask = torch.ones_like(rows)
    mask[2, -1] = 0  # a completion with a masked last token
    was_training = model.training
    model.eval()
    refused = None
    try:
        with torch.no_grad():
            plain, _ = completion_logprobs(model, rows, mask, tail.numel(), share_prompts=False)
            try:
                packed, _ = completion_logprobs(model, rows, mask, tail.numel(), share_prompts=True,
                                                completions_per_row=3)
            except Exception as exc:  # an attention that refuses the packed row's mask (its own kernel table)
                refused = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
    finally:
        model.train(was_training)
    real = mask[:, -tail.numel():].bool()
    if refused is None:
        error = (packed - plain)[real].abs().max().item()
        if error <= tolerance * max(1.0, plain[real].abs().max().item()):
            return True
    base = shared_prompts.base_model(model)
    setattr(base, shared_prompts.OFF_FLAG, True)
    why = f"fail ({refused})" if refused else f"differ from the unpacked ones by {error:.3g}"
    warnings.warn(f"completion_logprobs: {type(base).__name__}'s log-probs with its groups' prompts shared {why}; "
                  "each completion runs with its own copy of the prompt", stacklevel=2)
    return False
