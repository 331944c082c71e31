"""Peak-memory model of one GRPO step, computed from a model config before anything is loaded.

``estimate_peak_memory(model_config, *, num_sequences, prompt_length, completion_length, dtype, ...)``
returns a :class:`MemoryEstimate` (bytes per component, ``.peak``, ``.floor``, ``.table()``), which
``grpo train --dry-run`` prints. Parameter counts are exact: the model is instantiated on the ``meta``
device (no storage), so tied embeddings and every architecture transformers knows are counted right.
Activation sizes are estimates for a Llama-style decoder layer with fused (sdpa/flash) attention.

What the step holds at its peak (the larger of the two phases, on top of the resident state):
  resident   weights (4-bit linear layers with ``quantization_4bit``), a frozen reference copy when
             ``beta > 0`` on a full fine-tune (LoRA disables the adapter instead), and the trainable
             parameters' fp32 LoRA copies, gradients and AdamW's two moments;
  generation the KV cache of ``num_sequences x (prompt + completion)`` tokens and the prefill's largest
             layer intermediate;
  training   per forward/backward pass (the rows that fit in ``micro_batch_tokens``): the per-layer
             activations (only the layer inputs under gradient checkpointing, plus one layer being
             recomputed; the inputs live in host RAM with ``offload_activations``) and the chunked
             log-prob tile (:mod:`grpo_core.policy.logprobs`): never the ``[B, K, V]`` logits.
The old-policy pass (``num_iterations > 1``) and the reference pass (``beta > 0``) run without grad:
they add their per-token outputs, not activations. With prompts shared through FlexAttention block masks
(``shared_prompts = "flex_attention"``, grpo_core.policy.shared_prompts) a pass holds the activations of its packed
rows: each group's prompt once, then its completions. Shared through a dense mask (the CPU's) a pass is priced
unpacked: the prompt tokens it saves are spent again on its ``[rows, L, L]`` mask and the masked score tiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from grpo_core.policy.activations import mlp_tile_tokens
from grpo_core.policy.logprobs import vocab_chunk_for
from grpo_core.policy.packed_attention import FLEX
from grpo_core.policy.shared_prompts import completions_per_row, layer_cost

GiB = 1024**3
_DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2}
# NF4 with double quantization: 4 bits + ~0.127 bits of quantization constants per parameter.
NF4_BYTES_PER_PARAM = 4.127 / 8


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element of ``dtype`` (a ``torch.dtype`` or a name such as ``"bfloat16"``)."""
    if isinstance(dtype, torch.dtype):
        return torch.empty(0, dtype=dtype).element_size()
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPE_BYTES:
        raise ValueError(f"dtype: unknown dtype {dtype!r} (expected one of {sorted(set(_DTYPE_BYTES))})")
    return _DTYPE_BYTES[name]


@dataclass
class ParamCounts:
    total: int  # unique parameters (tied embeddings once)
    linear_in_layers: int  # nn.Linear weights other than the output head (what 4-bit quantizes)
    lora_per_rank: int  # sum of (in + out) over those linear layers: LoRA params = rank x this


def count_parameters(model_config: Any, model: Any = None) -> ParamCounts:
    """Exact parameter counts of the causal LM ``model_config`` describes (built on the meta device), or of a
    loaded ``model`` (its base: a peft wrapper's adapters left out)."""
    if model is None:
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(model_config)
    model = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = model.get_output_embeddings()
    linear = lora = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module is not head and "lora_" not in name:
            linear += module.in_features * module.out_features  # a 4-bit layer's packed weight counts as unpacked
            lora += module.in_features + module.out_features
    total = sum(_numel(p) for n, p in model.named_parameters() if "lora_" not in n)
    return ParamCounts(total, linear, lora)


def _numel(p: torch.Tensor) -> int:
    """Elements of a parameter as the model uses it (bitsandbytes' 4-bit weights are stored packed)."""
    state = getattr(p, "quant_state", None)
    return int(torch.Size(state.shape).numel()) if state is not None else p.numel()


@dataclass
class MemoryEstimate:
    """Bytes per component of the GRPO step's peak; ``rows`` keeps (name, bytes, note) in display order."""

    rows: list[tuple[str, int, str]] = field(default_factory=list)
    resident: int = 0
    generation: int = 0
    training: int = 0
    host_offload: int = 0
    floor: int = 0  # weights + trainable state + one log-prob tile: what no schedule can go under

    @property
    def peak(self) -> int:
        return self.resident + max(self.generation, self.training)

    def component(self, name: str) -> int:
        return next(b for n, b, _ in self.rows if n == name)

    def to_dict(self) -> dict[str, int]:
        return {**{n: b for n, b, _ in self.rows}, "peak": self.peak, "floor": self.floor}

    def table(self) -> str:
        width = max(len(n) for n, _, _ in self.rows)
        lines = [f"{'component':<{width}}  {'GiB':>8}  note"]
        lines += [f"{n:<{width}}  {b / GiB:8.3f}  {note}" for n, b, note in self.rows]
        lines.append(f"{'estimated peak':<{width}}  {self.peak / GiB:8.3f}  resident + max(generation, training)")
        lines.append(f"{'floor':<{width}}  {self.floor / GiB:8.3f}  weights + trainable state + one logits tile")
        if self.host_offload:
            lines.append(f"{'host RAM (offload)':<{width}}  {self.host_offload / GiB:8.3f}  checkpointed layer inputs")
        return "\n".join(lines)


def estimate_peak_memory(
    model_config: Any,
    *,
    num_sequences: int,
    prompt_length: int,
    completion_length: int,
    dtype: Any = "float32",
    lora_rank: int = 0,
    quantization_4bit: bool = False,
    gradient_checkpointing: bool = True,
    offload_activations: bool = False,
    chunk_size: int = 1024,
    beta: float = 0.0,
    num_iterations: int = 1,
    mlp_chunk_tokens: int | str | None = "auto",
    micro_batch_tokens: int = 0,
    generation_sequences: int | None = None,
    counts: ParamCounts | None = None,
    lora_autocast: bool = False,
    shared_prompts: str | None = None,
    group_size: int = 1,
    policy_samples: bool = True,
) -> MemoryEstimate:
    """Estimated peak memory of one GRPO step on the accelerator (the process, on a CPU machine).

    ``num_sequences`` is the number of sequences in one micro-batch (prompts x generations /
    gradient accumulation steps), run as row slices of at most ``micro_batch_tokens`` padded tokens
    (0: all at once; the trainer's ``micro_batch_tokens``); ``lora_rank=0`` means a full fine-tune;
    ``mlp_chunk_tokens`` is the MLP tile of :func:`grpo_core.policy.activations.tile_mlp` (``"auto"``: the
    hidden size, at least 512; None: untiled). ``generation_sequences`` is the whole step's sequences
    (prompts x generations): generation samples them in one batch and the old/reference log-probs are
    kept for all of them, whatever the gradient accumulation (default: ``num_sequences``).
    ``counts`` skips the meta-device build. ``lora_autocast``: LoRA's forwards run under autocast in the
    base's 16-bit dtype with peft's input casts off (the step planner's choice on an accelerator); otherwise a
    16-bit base's LoRA layers each keep an fp32 copy of their input for the adapter's backward.
    ``shared_prompts``: the packing kernel of the step's shared prompts (None: not shared), with ``group_size``
    completions per prompt. ``policy_samples``: the policy itself samples the step's completions (False: a vLLM
    engine does, whose memory is its own, and the policy holds no KV cache).
    """
    for name, value in (("num_sequences", num_sequences), ("completion_length", completion_length),
                        ("chunk_size", chunk_size), ("num_iterations", num_iterations)):
        if value < 1:
            raise ValueError(f"{name}: must be >= 1, got {value}")
    if prompt_length < 0 or lora_rank < 0:
        raise ValueError("prompt_length and lora_rank must be >= 0")
    cfg = model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
    counts = counts or count_parameters(model_config)
    nbytes = dtype_bytes(dtype)
    hidden, layers, vocab = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    inter = getattr(cfg, "intermediate_size", None) or 4 * hidden
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    kv_dim = (getattr(cfg, "num_key_value_heads", None) or heads) * head_dim
    seq = prompt_length + completion_length
    group = generation_sequences or num_sequences  # generation holds the whole step's cache and prefill
    if group < num_sequences:
        raise ValueError(f"generation_sequences ({group}) must be >= num_sequences ({num_sequences})")
    kv_tokens = group * seq
    if micro_batch_tokens > 0:  # the trainer's row slices: what one forward/backward sees
        num_sequences = min(num_sequences, max(1, micro_batch_tokens // seq))
    tokens = num_sequences * seq
    completion_tokens = num_sequences * completion_length
    packed = ""
    if shared_prompts == FLEX and group_size > 1 and prompt_length:  # as shared_prompts.plan packs a pass's groups
        groups = [group_size] * (num_sequences // group_size) + [num_sequences % group_size] * bool(
            num_sequences % group_size)
        pers = [completions_per_row(FLEX, g, prompt_length, completion_length, *layer_cost(cfg)) for g in groups]
        packed_rows = sum(-(-g // p) for g, p in zip(groups, pers, strict=True))
        length = prompt_length + max(pers) * completion_length  # the rows padded to the longest
        if packed_rows * length < tokens:
            tokens = packed_rows * length
            packed = f" packed as {packed_rows} rows of {length} tokens"

    est = MemoryEstimate()
    add = est.rows.append
    if quantization_4bit:
        weights = int(counts.linear_in_layers * NF4_BYTES_PER_PARAM) + (counts.total - counts.linear_in_layers) * nbytes
        note = "NF4 linear layers, the rest in the compute dtype"
    else:
        weights = counts.total * nbytes
        note = f"{counts.total / 1e6:.1f}M params x {nbytes} B"
    add(("weights", weights, note))
    ref = weights if beta > 0 and lora_rank == 0 else 0
    add(("reference weights", ref, "frozen copy (beta > 0, full fine-tune)" if ref else "none (beta = 0 or LoRA)"))
    if lora_rank:
        trainable, tbytes = lora_rank * counts.lora_per_rank, 4  # peft keeps adapters in fp32
        note = f"LoRA r={lora_rank}: {trainable / 1e6:.2f}M fp32 params + grads + 2 AdamW moments"
        state = trainable * tbytes * 4
    else:
        trainable, tbytes = counts.total, nbytes
        note = f"grads + 2 AdamW moments of {trainable / 1e6:.1f}M params"
        state = trainable * tbytes * 3
    add(("trainable state", state, note))
    est.resident = weights + ref + state

    if policy_samples:
        kv = kv_tokens * layers * 2 * kv_dim * nbytes
        prefill = group * max(prompt_length, 1) * (2 * inter + 2 * hidden) * nbytes
        add(("KV cache", kv, f"{group} x {seq} tokens x {layers} layers (generation)"))
        add(("prefill working set", prefill, "largest layer intermediate of the prompt pass"))
    else:
        kv = prefill = 0
        add(("KV cache", 0, "none: vLLM samples, in its own memory"))
        add(("prefill working set", 0, "none: vLLM samples"))
    est.generation = kv + prefill

    attn_part = (8 * hidden + 2 * kv_dim) * nbytes  # per token, saved for backward (fused attention)
    mlp_part = 4 * inter * nbytes
    if lora_rank:
        attn_part += 7 * 2 * lora_rank * 4  # each adapter keeps its fp32 r-dim intermediate
        if nbytes < 4 and not lora_autocast:  # peft casts a 16-bit input to the adapter's fp32: a copy per layer
            attn_part += (3 * hidden + heads * head_dim) * 4  # q, k, v, o inputs
            mlp_part += (2 * hidden + inter) * 4  # gate, up, down inputs
    per_token_layer = attn_part + mlp_part
    residual = tokens * hidden * nbytes
    if gradient_checkpointing:
        kept = layers * residual
        mlp_tokens = min(tokens, mlp_tile_tokens(cfg, mlp_chunk_tokens) or tokens)
        # the layer inputs + one layer recomputed in backward (its MLP one tile at a time)
        acts = residual + tokens * attn_part + mlp_tokens * mlp_part
        if offload_activations:
            est.host_offload, kept = kept, 0
        note = (f"{num_sequences} rows per pass{packed}: layer inputs"
                + (" (in host RAM)" if offload_activations else "")
                + " + one recomputed layer"
                + (f", MLP in {mlp_tokens}-token tiles" if mlp_tokens < tokens else ""))
        acts += kept
    else:
        acts = layers * tokens * per_token_layer + residual
        note = f"all {layers} layers' saved activations (no checkpointing){packed}"
    add(("activations", acts, note))
    v_chunk = vocab_chunk_for(chunk_size, vocab)
    rows = min(chunk_size, completion_tokens)
    tile = 4 * rows * v_chunk * 4  # fp32 logits, exp, and two temporaries
    per_token_out = completion_tokens * (hidden * 4 + 4 * 4)  # d logp / d h (fp32), logps, lse, entropy
    add(("logits chunk", tile + per_token_out, f"{rows} tokens x {v_chunk} vocab tile; full logits would be "
         f"{completion_tokens * vocab * 4 / GiB:.2f} GiB"))
    extra_passes = (num_iterations > 1) + (beta > 0)
    kept_logps = extra_passes * group * completion_length * 4  # kept for every row of the step
    add(("old/ref log-probs", kept_logps,
         f"old-policy pass: {'yes' if num_iterations > 1 else 'no'}, reference pass: {'yes' if beta > 0 else 'no'}"))
    est.training = acts + tile + per_token_out + kept_logps
    est.floor = weights + state + tile
    return est
