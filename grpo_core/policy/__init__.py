"""The policy model: loading it, its activation memory, its log-probs, and what it costs in memory.

``models``          load the model and tokenizer (full, LoRA, QLoRA, GGUF), the reference model, saving
``activations``     activation checkpointing and the tiled MLP (how little of a pass is held for backward)
``logprobs``        per-token log-probs through a chunked head: never the full ``[B, K, V]`` logits
``shared_prompts``  each prompt's tokens once for its whole group of completions
``packed_attention`` what a packed row's tokens see: a dense mask, or FlexAttention block masks (fused)
``lean_lora``       a lean forward of plain LoRA layers while sampling
``memory_model``    the peak-memory estimate ``grpo config validate`` prints
``step_plan``       the step planner: micro-batch, checkpointing, tiles, head chunk, sharing per device and budget
``fp32_head``       ``cast_lm_head_to_fp32``: the output head in float32
``reference_sync``  ``sync_ref_model``: the reference model moved towards the policy every few steps
``router_loss``     an MoE model's load-balancing loss (``router_aux_loss_coef``), exact over row slices and ranks
"""
