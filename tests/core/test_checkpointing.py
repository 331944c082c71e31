"""Gradient checkpointing: the decoder layers really recompute in backward, gradients are unchanged, and
the offload hooks see exactly the checkpointed layer inputs (on this CPU-only machine the device-to-host
copy itself is a no-op; the hooks, the bookkeeping and the gradients are what is tested here)."""

from __future__ import annotations

import pytest
import torch

from grpo_core.policy.activations import (
    OFFLOAD_STATS,
    _pack_to_host,
    _unpack_from_host,
    enable_gradient_checkpointing,
    is_checkpointing,
    is_offloading,
    offloaded_checkpoint,
)
from grpo_core.policy.logprobs import completion_logprobs

B, T, H, LAYERS = 2, 24, 32, 3


def _model(seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=500, hidden_size=H, intermediate_size=4 * H, num_hidden_layers=LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return Qwen2ForCausalLM(cfg).train()


def _lora(model):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.05)
    return model


def _step(model, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, torch.Tensor], int]:
    """Grads of a completion-logprob objective, and how many MLP activations ran (module hooks do not fire
    in a checkpoint's recompute, and the MLP's own forward may be wrapped, so the activation class's
    forward is counted)."""
    act = type(next(m for n, m in model.named_modules() if n.endswith("mlp.act_fn")))
    calls = []
    forward = act.forward

    def counted(self, *args, **kwargs):
        calls.append(1)
        return forward(self, *args, **kwargs)

    torch.manual_seed(1)
    ids = torch.randint(0, 500, (B, T))
    model.zero_grad()
    with monkeypatch.context() as patch:
        patch.setattr(act, "forward", counted)
        logps, _ = completion_logprobs(model, ids, torch.ones_like(ids), T // 2, chunk_size=7)
        logps.sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, len(calls)


@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("offload", [False, True])
def test_checkpointing_recomputes_layers_and_keeps_gradients(lora, offload, monkeypatch):
    plain = _lora(_model()) if lora else _model()
    want, forwards = _step(plain, monkeypatch)
    assert forwards == LAYERS and not is_checkpointing(plain)

    model = _lora(_model()) if lora else _model()
    enable_gradient_checkpointing(model, offload_to_cpu=offload, mlp_chunk_tokens=None)  # tiles: below
    assert is_checkpointing(model) and is_offloading(model) == offload
    OFFLOAD_STATS.reset()
    got, forwards = _step(model, monkeypatch)
    assert forwards == 2 * LAYERS  # each layer runs again in backward
    assert got.keys() == want.keys() and got
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6, msg=name)
    if offload:
        # the hooks see the layer inputs only: the residual stream (+ rotary cos/sin, mask) per layer,
        # never the attention/MLP intermediates the layer computes
        residual = B * T * H * 4
        assert OFFLOAD_STATS.bytes_seen >= LAYERS * residual
        assert OFFLOAD_STATS.bytes_seen <= LAYERS * 2 * residual
        assert OFFLOAD_STATS.bytes_moved == 0  # already on the host: kept, not copied
    else:
        assert OFFLOAD_STATS.tensors == 0


def test_pack_keeps_host_tensors_without_copying():
    x = torch.randn(3, 4)
    packed = _pack_to_host(x)
    assert packed[1] is x and _unpack_from_host(packed) is x


def test_offloaded_checkpoint_rejects_reentrant_mode():
    with pytest.raises(ValueError, match="use_reentrant=False"):
        offloaded_checkpoint(lambda t: t * 2, torch.ones(2, requires_grad=True), use_reentrant=True)


def test_model_without_checkpointable_layers_is_a_clear_error():
    with pytest.raises(ValueError, match="Linear does not support gradient checkpointing"):
        enable_gradient_checkpointing(torch.nn.Linear(2, 2))


def _largest_intermediate_during(fn) -> int:
    """Largest [tokens, intermediate] activation (last dim 4H, not the down_proj weight) any op creates."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Probe(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for x in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.shape[-1] == 4 * H and x.shape[0] != H:
                    Probe.largest = max(Probe.largest, x.numel())
            return out

    with Probe():
        fn()
    return Probe.largest


@pytest.mark.parametrize("lora", [False, True])
def test_tiled_mlp_keeps_gradients_and_bounds_the_intermediate(lora, monkeypatch):
    from grpo_core.policy.activations import tile_mlp

    plain = _lora(_model()) if lora else _model()
    want, _ = _step(plain, monkeypatch)
    model = _lora(_model()) if lora else _model()
    enable_gradient_checkpointing(model, mlp_chunk_tokens=5)  # B*T = 48 tokens: 10 tiles, the last of 3
    assert tile_mlp(model, 5) == LAYERS  # idempotent: re-tiling wraps the original forward, not the tiled one
    got, mlp_forwards = _step(model, monkeypatch)
    # 10 tiles per layer: forward + layer recompute, plus the tiles' own recompute in backward (the layer
    # recompute may stop early once its saved tensors are back, so not exactly 3x)
    assert 2 * LAYERS * 10 < mlp_forwards <= 3 * LAYERS * 10
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6, msg=name)

    ids, mask = torch.randint(0, 500, (B, T)), torch.ones(B, T, dtype=torch.long)
    untiled = _lora(_model()) if lora else _model()  # same seeds: same weights as `model`
    enable_gradient_checkpointing(untiled, mlp_chunk_tokens=None)

    def fwd_bwd(m):
        return lambda: completion_logprobs(m, ids, mask, T // 2, chunk_size=7)[0].sum().backward()

    intermediate = B * T * 4 * H  # one [tokens, intermediate] activation of the whole batch
    assert _largest_intermediate_during(fwd_bwd(untiled)) >= intermediate
    assert _largest_intermediate_during(fwd_bwd(model)) < intermediate // 4
    with torch.no_grad():  # no-grad passes (old policy, reference) are tiled too, with the same numbers
        torch.testing.assert_close(completion_logprobs(model, ids, mask, T // 2)[0],
                                   completion_logprobs(untiled, ids, mask, T // 2)[0])


def test_tile_size_must_be_positive():
    from grpo_core.policy.activations import tile_mlp

    with pytest.raises(ValueError, match="mlp_chunk_tokens"):
        tile_mlp(_model(), 0)


def test_auto_tiles_by_the_hidden_size():
    from transformers import Qwen2Config

    from grpo_core.policy.activations import MIN_AUTO_MLP_TILE, _tile_of, mlp_tile_tokens

    assert mlp_tile_tokens(Qwen2Config(hidden_size=8192)) == 8192  # ALST's rule above the token budget
    assert mlp_tile_tokens(Qwen2Config(hidden_size=3584)) == MIN_AUTO_MLP_TILE == 4096
    model = _model()
    assert mlp_tile_tokens(model.config) == MIN_AUTO_MLP_TILE > H  # a toy model: not cut into slivers
    assert mlp_tile_tokens(model.config, 0) is None and mlp_tile_tokens(model.config, None) is None
    with pytest.raises(ValueError, match="mlp_chunk_tokens"):
        mlp_tile_tokens(model.config, "half")
    enable_gradient_checkpointing(model)  # "auto"
    tiles = {_tile_of(m) for m in model.modules() if type(m).__name__.endswith("MLP")}
    assert tiles == {MIN_AUTO_MLP_TILE}
