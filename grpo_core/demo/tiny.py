"""A tokenizer trained on the spot and a tiny Llama, saved with ``save_pretrained`` like a hub checkpoint.

The tokenizer is character level (a ``tokenizers`` WordLevel model whose vocabulary is learned
from the task's text), with the format tags as single tokens: digits stay separate tokens,
which is what lets a model this small learn arithmetic. Nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAGS = ["<reasoning>", "</reasoning>", "<answer>", "</answer>"]
PAD, EOS = "<pad>", "<eos>"


@dataclass(frozen=True)
class TinySpec:
    """Size of the demo model."""

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 192
    max_positions: int = 64
    seed: int = 0


def train_tokenizer(corpus: Iterable[str], tags: Sequence[str] = TAGS) -> Any:
    """A character-level tokenizer whose vocabulary is trained on ``corpus``, ``tags`` as whole tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=PAD))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok.decoder = decoders.Fuse()
    trainer = trainers.WordLevelTrainer(special_tokens=[PAD, EOS], min_frequency=1, show_progress=False)
    texts = list(corpus)
    for tag in sorted(tags, key=len, reverse=True):  # whole tokens: learn the characters of the text around them
        texts = [t.replace(tag, " ") for t in texts]
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in tags])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS, padding_side="left")


def build_tiny_model(out_dir: str | Path, corpus: Iterable[str], spec: TinySpec = TinySpec(), *,
                     tags: Sequence[str] = TAGS, chat_template: str | None = None) -> Path:
    """Train the tokenizer on ``corpus`` (``tags`` whole tokens; ``chat_template`` its chat template, none by
    default), build a randomly initialised Llama, save both to ``out_dir``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(corpus, tags)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=spec.hidden, intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.max_positions, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.eos_token_id
    )
    out = Path(out_dir)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
