"""A tokenizer that writes tool calls as Qwen2.5 does (TRL's own ``qwen2_5.jinja`` template, ``<tool_call>``
tags as whole tokens), a variant of the template that does not preserve prefixes, and a tiny Llama over it
that calls tools often: what the multi-turn rollout tests run on. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trl

QWEN25_TEMPLATE = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
# as Qwen3's template does: earlier assistant turns lose their <think> block once a later message follows, and
# the last one, when it calls tools, gets an empty one. Rendering a conversation again gives other ids than the
# ones the model saw, and TRL's own check finds it does not preserve prefixes
NOT_PREFIX_PRESERVING = QWEN25_TEMPLATE.replace(
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}",
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content if loop.last else "
    "message.content.split('</think>')[-1]) + '<|im_end|>' + '\\n' }}").replace(
    "{{- '<|im_start|>' + message.role }}\n        {%- if message.content %}",
    "{{- '<|im_start|>' + message.role }}\n        {%- if loop.last %}{{- '\\n<think>\\n\\n</think>' }}{%- endif %}"
    "\n        {%- if message.content %}").replace(
    "{{- '\\n' + message.content }}",
    "{{- '\\n' + (message.content if loop.last else message.content.split('</think>')[-1]) }}")
assert NOT_PREFIX_PRESERVING.count("loop.last") == QWEN25_TEMPLATE.count("loop.last") + 3
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
CORPUS = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t{}[]()<>\"':,.+-*/=_#?!%|&;@$^~`\\"
          "éè")


def tool_tokenizer(template: str = QWEN25_TEMPLATE) -> Any:
    """Character-level, ``<|im_end|>`` its EOS, the tags whole (not special) tokens, ``template`` its chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok.decoder = decoders.Fuse()
    tok.train_from_iterator([CORPUS], trainers.WordLevelTrainer(special_tokens=SPECIAL, show_progress=False))
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in TAGS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                   padding_side="left")
    fast.chat_template = template
    return fast


def tool_calling_model(out_dir: Path, tokenizer: Any, *, boost: float = 0.6, seed: int = 0, hidden: int = 32,
                       heads: int = 4, kv_heads: int = 2) -> Path:
    """A 2-layer Llama with random weights over ``tokenizer``, saved with it, whose every position leans towards
    ``<tool_call>`` and ``<|im_end|>``: one embedding dimension is large for every token, so it dominates the
    normalised hidden state, and only those two tokens read it in the head. Sampled, it opens tool calls (never
    well-formed ones) and ends turns within a few tokens: many turns, each answered by a tool's error message.
    ``hidden`` and ``heads`` size it (vLLM's CPU attention wants a head size of 32 or more)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=2048,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 8.0
        model.lm_head.weight[:, 0] = 0.0
        for token in ("<tool_call>", "<|im_end|>"):
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(token), 0] = boost
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
