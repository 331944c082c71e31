"""Shared prompts through FlexAttention block masks (grpo_core.policy.packed_attention): the same per-token log-probs
as the unpacked rows and as the dense-mask packing, gradients too, on tiny Llama and Qwen2 models with prompts of
different lengths, left and right padding and masked completion tokens; the block mask skips the blocks no query
sees; the model's other forwards stay on sdpa; the cost estimate packs whole groups where the dense mask could not.

torch runs FlexAttention's backward on CUDA only and refuses it on a CPU before dispatching; the gradient tests lift
that guard so that flex's own eager autograd (the reference its compiled kernels are checked against) runs here.
Forwards run uncompiled, as the project runs flex on a CPU (compiling takes tens of seconds per shape here)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
flex_module = pytest.importorskip("torch.nn.attention.flex_attention")

from grpo_core.policy import packed_attention as pa  # noqa: E402
from grpo_core.policy.logprobs import check_shared_prompts, completion_logprobs  # noqa: E402
from grpo_core.policy.shared_prompts import plan  # noqa: E402
from tests.core.test_shared_prompts import K, logps_and_grads  # noqa: E402  (the same completions, one helper)


def tiny(kind: str = "llama", flex: bool = True):
    import transformers

    torch.manual_seed(0)
    name = {"llama": "Llama", "qwen2": "Qwen2"}[kind]
    cfg = getattr(transformers, f"{name}Config")(vocab_size=97, hidden_size=32, intermediate_size=64,
                                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                 attn_implementation="sdpa")
    model = getattr(transformers, f"{name}ForCausalLM")(cfg).float()
    if flex:
        pa.use_flex_packing(model)
    return model


def grouped_batch(prompts=(6, 4, 2), group: int = 3, width: int = 6):
    """Groups of ``group`` completions behind prompts of the given real lengths (left-padded to ``width``),
    completions of ``K`` columns with right padding and masked tokens inside them."""
    g = torch.Generator().manual_seed(1)
    rows = group * len(prompts)
    ids = torch.randint(1, 97, (rows, width + K), generator=g)
    mask = torch.ones_like(ids)
    for i, length in enumerate(prompts):
        block = slice(i * group, (i + 1) * group)
        ids[block, :width] = ids[i * group, :width]
        ids[block, : width - length], mask[block, : width - length] = 0, 0
    mask[1, -2:] = 0
    mask[4, -1] = 0
    mask[5, -3] = 0
    mask[rows - 1, -4] = 0
    return ids, mask


@pytest.fixture
def flex_backward_on_cpu(monkeypatch):
    monkeypatch.setattr(flex_module, "_validate_device", lambda *a: None)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("per_row", [1, 3])
def test_flex_packed_log_probs_equal_the_unpacked_and_the_dense_packed_ones(kind, per_row):
    ids, mask = grouped_batch()
    flex, dense = tiny(kind), tiny(kind, flex=False)
    packing = plan(flex, ids, mask, K, per_row=per_row)
    assert packing is not None and packing.kernel == pa.FLEX and packing.input_ids.size(0) == 3 * -(-3 // per_row)
    assert plan(dense, ids, mask, K, per_row=per_row).kernel == pa.DENSE
    real = mask[:, -K:].bool()
    with torch.no_grad():
        plain, _ = completion_logprobs(flex, ids, mask, K)
        packed, _ = completion_logprobs(flex, ids, mask, K, share_prompts=True, completions_per_row=per_row)
        dense_packed, _ = completion_logprobs(dense, ids, mask, K, share_prompts=True, completions_per_row=per_row)
    torch.testing.assert_close(packed[real], plain[real], rtol=0, atol=2e-6)
    torch.testing.assert_close(packed[real], dense_packed[real], rtol=0, atol=2e-6)


def test_flex_packing_runs_the_block_mask_through_flex_attention(monkeypatch):
    """The packed forward hands each layer a block mask and FlexAttention computes it (not sdpa); the unpacked
    forward of the same model still goes to sdpa."""
    model = tiny()
    ids, mask = grouped_batch()
    calls = []
    original = pa._eager_flex
    monkeypatch.setattr(pa, "_eager_flex", lambda *a, **k: calls.append(type(a[3]).__name__) or original(*a, **k))
    with torch.no_grad():
        completion_logprobs(model, ids, mask, K)
        assert calls == []
        completion_logprobs(model, ids, mask, K, share_prompts=True, completions_per_row=3)
    assert calls == ["BlockMask"] * model.config.num_hidden_layers


def test_flex_packed_gradients_equal_the_unpacked_ones(flex_backward_on_cpu):
    model = tiny()
    ids, mask = grouped_batch()
    plain_logps, plain_grads = logps_and_grads(model, ids, mask)
    packed_logps, packed_grads = logps_and_grads(model, ids, mask, share_prompts=True, completions_per_row=3)
    torch.testing.assert_close(packed_logps, plain_logps, rtol=0, atol=2e-6)
    assert max(g.abs().max().item() for g in plain_grads) > 0.1
    for a, b in zip(packed_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=5e-6)


def test_checkpointed_lora_layers_recompute_through_the_block_mask(flex_backward_on_cpu):
    """Under gradient checkpointing each layer runs again in backward with the block mask it was given."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny(flex=False), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                        init_lora_weights=False))
    pa.use_flex_packing(model)
    assert pa.packing_kernel(model) == pa.FLEX
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    model.train()
    ids, mask = grouped_batch(prompts=(5, 3), group=4)
    plain_logps, plain_grads = logps_and_grads(model, ids, mask)
    packed_logps, packed_grads = logps_and_grads(model, ids, mask, share_prompts=True, completions_per_row=4)
    torch.testing.assert_close(packed_logps, plain_logps, rtol=0, atol=2e-6)
    assert plain_grads and max(g.abs().max().item() for g in plain_grads) > 0.01
    for a, b in zip(packed_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=5e-6)


def test_the_block_mask_is_the_dense_rule_and_skips_other_completions_blocks():
    """Blocks of 128: a prompt of 100 tokens then 3 completions of 256. Each block the block mask keeps holds a
    pair the dense rule allows and each it drops holds none; a completion's query blocks visit no other
    completion's key blocks."""
    prompt, k, n = 100, 256, 3
    length = prompt + n * k
    segment = torch.cat([torch.full((prompt,), -1), torch.arange(n).repeat_interleave(k)]).unsqueeze(0)
    valid = torch.ones_like(segment, dtype=torch.bool)
    valid[0, prompt + 10] = False
    mask = pa.block_mask(segment, valid)
    allowed = pa.dense_allowed(segment, valid)[0]
    blocks = -(-length // 128)
    padded = torch.zeros(blocks * 128, blocks * 128, dtype=torch.bool)
    padded[:length, :length] = allowed
    any_pair = padded.view(blocks, 128, blocks, 128).any(3).any(1)
    kept = mask.to_dense()[0, 0].bool()
    assert torch.equal(kept, any_pair)
    assert 0.3 < mask.sparsity() / 100 < 0.7
    # the last completion's first full query block (columns 612..739) sees the prompt's and its own blocks only
    last = (prompt + 2 * k + 127) // 128
    assert kept[last].nonzero().flatten().tolist() == [0, last - 1, last]


def test_the_cost_estimate_packs_whole_groups_through_flex_where_dense_could_not():
    model, dense = tiny(), tiny(flex=False)
    for m in (model, dense):
        m.config.hidden_size, m.config.intermediate_size = 576, 1536  # SmolLM2-135M's shape, for the estimate
    ids = torch.ones(16, 200 + 1024, dtype=torch.long)
    flex_plan = plan(model, ids, torch.ones_like(ids), 1024)
    assert flex_plan is not None and flex_plan.input_ids.shape == (1, 200 + 16 * 1024)
    dense_plan = plan(dense, ids, torch.ones_like(ids), 1024)
    assert dense_plan is None or dense_plan.input_ids.size(1) <= 200 + 4 * 1024


def test_the_load_check_passes_through_flex_and_turning_it_off_restores_the_dense_mask():
    model = tiny()
    assert check_shared_prompts(model, torch.arange(1, 13).unsqueeze(0))
    pa.use_flex_packing(model, enabled=False)
    assert pa.packing_kernel(model) == pa.DENSE
    ids, mask = grouped_batch()
    assert plan(model, ids, mask, K, per_row=3).kernel == pa.DENSE


def test_eager_attention_packs_through_the_dense_mask_only():
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, attn_implementation="eager"))
    pa.use_flex_packing(model)  # only sdpa's entry takes a block mask
    assert pa.packing_kernel(model) == pa.DENSE
    model.config._attn_implementation = "flash_attention_2"
    assert pa.packing_kernel(model) is None


def test_the_load_check_turns_packing_off_for_an_attention_that_refuses_the_block_mask(monkeypatch):
    """A model whose attention does not go through transformers' shared sdpa entry (its own kernel table) gets
    the block mask in plain sdpa, which refuses it: the load check warns and the model runs unpacked."""
    import warnings

    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    model = tiny()
    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS, "sdpa", pa._SDPA)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not check_shared_prompts(model, torch.arange(1, 13).unsqueeze(0))
    assert any("prompts shared fail" in str(w.message) for w in caught)
    ids, mask = grouped_batch()
    assert plan(model, ids, mask, K, per_row=3) is None
