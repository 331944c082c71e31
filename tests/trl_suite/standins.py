"""Offline stand-ins for the Hub repos TRL's GRPOTrainer tests load: the ``trl-internal-testing/tiny-*`` models
and the ``trl-internal-testing/zen`` dataset.

Each model is built as TRL's own ``scripts/generate_tiny_models`` builds it (the same architecture class and
config: hidden sizes, layers, heads, experts, the sequence classifier's ``num_labels=1``, weights in bfloat16 with
``init_weights_tiny_model``'s initialisation), with two differences: the tokenizer is a byte-level BPE trained on
the zen texts (a few hundred tokens, not the real model's 150k) holding the real model's special tokens, and the
vocabulary follows it. The chat template is the real model's, as TRL ships it in ``trl/chat_templates``. Each
repo is written into a Hub cache folder (``models--trl-internal-testing--NAME/snapshots/...``) so that
``from_pretrained("trl-internal-testing/NAME")`` finds it offline, wherever it is called from (the tests, TRL or
this project's trainer).

The zen dataset is rebuilt by TRL's own ``scripts/generate_zen_dataset.py`` (vendored beside this file), its
``push_to_hub`` captured into ``save_to_disk`` folders, one per config.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ORG = "trl-internal-testing"
REVISION = "0" * 40

# Qwen's special tokens in their real order, from their real first id (151643): TRL's tests spell some of their ids
QWEN = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
        "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
        "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
        "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
        "</tool_response>", "<think>", "</think>"]
QWEN_FIRST_SPECIAL = 151643
LLAMA = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
         "<|finetune_right_pad_id|>", "<|python_tag|>", "<|eom_id|>"]
GEMMA = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]

# name -> (model class, config kwargs as TRL's generator sets them, chat template in trl/chat_templates,
#          special tokens, bos, eos, pad)
Spec = tuple[str, dict[str, Any], str, list[str], str | None, str, str | None]
SMALL = {"hidden_size": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
         "intermediate_size": 32}
SEQCLS = {"num_labels": 1, "hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2,
          "num_hidden_layers": 2, "intermediate_size": 32}
MODELS: dict[str, Spec] = {
    "tiny-Qwen2ForCausalLM-2.5": ("Qwen2ForCausalLM", SMALL, "qwen2_5", QWEN, None, "<|im_end|>", "<|endoftext|>"),
    "tiny-Qwen2ForSequenceClassification-2.5": (
        "Qwen2ForSequenceClassification", {**SEQCLS, "rope_theta": 1000000.0}, "qwen2_5", QWEN, None, "<|im_end|>",
        "<|endoftext|>"),
    "tiny-Qwen3ForCausalLM": ("Qwen3ForCausalLM", SMALL, "qwen3_training", QWEN, None, "<|im_end|>", "<|endoftext|>"),
    "tiny-Qwen3ForSequenceClassification": (
        "Qwen3ForSequenceClassification", SEQCLS, "qwen3", QWEN, None, "<|im_end|>", "<|endoftext|>"),
    "tiny-Qwen3MoeForCausalLM": (
        "Qwen3MoeForCausalLM", {**SMALL, "num_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": True,
                                "head_dim": 128, "max_position_embeddings": 40960, "rope_theta": 1000000.0},
        "qwen3", QWEN, None, "<|im_end|>", "<|endoftext|>"),
    "tiny-LlamaForCausalLM-3.2": ("LlamaForCausalLM", SMALL, "llama3_2", LLAMA, "<|begin_of_text|>", "<|eot_id|>",
                                  "<|finetune_right_pad_id|>"),
    "tiny-LlamaForSequenceClassification-3.2": (
        "LlamaForSequenceClassification", SEQCLS, "llama3_2", LLAMA, "<|begin_of_text|>", "<|eot_id|>", None),
    "tiny-Gemma2ForCausalLM": ("Gemma2ForCausalLM", SMALL, "gemma", GEMMA, "<bos>", "<eos>", "<pad>"),
    "tiny-Cohere2ForCausalLM": (
        "Cohere2ForCausalLM", {**SMALL, "logit_scale": 1.0, "rope_theta": 50000, "tie_word_embeddings": True},
        "cohere2", ["<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<PAD>", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
                    "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>"],
        "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<PAD>"),
    "tiny-Glm4MoeForCausalLM": (
        "Glm4MoeForCausalLM", {**SMALL, "moe_intermediate_size": 32, "head_dim": 2, "n_routed_experts": 4,
                               "num_experts_per_tok": 2, "attention_bias": True, "routed_scaling_factor": 2.5,
                               "use_qk_norm": True, "num_nextn_predict_layers": 1, "rope_theta": 1000000},
        "glm4moe", ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>",
                    "<|observation|>", "<think>", "</think>", "<tool_call>", "</tool_call>"],
        None, "<|endoftext|>", "<|endoftext|>"),
    "tiny-GptOssForCausalLM": (
        "GptOssForCausalLM", {**SMALL, "num_local_experts": 4, "num_experts_per_tok": 2}, "gptoss",
        ["<|startoftext|>", "<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>",
         "<|constrain|>", "<|return|>", "<|call|>"], "<|startoftext|>", "<|return|>", "<|endoftext|>"),
    "tiny-NemotronHForCausalLM-nano": (
        "NemotronHForCausalLM", {"hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2,
                                 "intermediate_size": 32, "layers_block_type": ["mamba", "attention", "moe"],
                                 "mamba_num_heads": 8, "mamba_head_dim": 4, "mamba_n_groups": 1,
                                 "ssm_state_size": 16, "mamba_d_conv": 4, "mamba_expand": 2, "n_routed_experts": 4,
                                 "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                 "moe_shared_expert_intermediate_size": 32, "use_mamba_kernels": False},
        "nemotron_3_nano", ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                            "<tool_call>", "</tool_call>"], "<s>", "<|im_end|>", "</s>"),
    "tiny-RemoteForCausalLM": ("RemoteForCausalLM", SMALL, "llama3_2", LLAMA, "<|begin_of_text|>", "<|eot_id|>",
                               None),
}


def corpus() -> list[str]:
    """The texts the stand-in tokenizers are trained on: every string of TRL's zen script."""
    text = (HERE / "generate_zen_dataset.py").read_text()
    return re.findall(r'"((?:[^"\\]|\\.)+)"', text) * 2


def build_tokenizer(specials: list[str], bos: str | None, eos: str, pad: str | None, template: str) -> Any:
    """A byte-level BPE of 512 tokens trained on the zen texts, then ``specials`` (Qwen's from their real ids:
    the vocabulary is padded with tokens no text produces up to 151643)."""
    import trl
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=512, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    if specials is QWEN:
        state = json.loads(tok.to_str())["model"]
        vocab = dict(state["vocab"])
        vocab.update({f"<|unused_{i}|>": i for i in range(len(vocab), QWEN_FIRST_SPECIAL)})
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=pad)
    fast.chat_template = (Path(trl.__file__).parent / "chat_templates" / f"{template}.jinja").read_text()
    return fast


def build_model(name: str, out: Path) -> None:
    import torch
    import transformers
    from torch import nn

    cls_name, kwargs, template, specials, bos, eos, pad = MODELS[name]
    tok = build_tokenizer(specials, bos, eos, pad, template)
    ids = {"vocab_size": len(tok), "eos_token_id": tok.eos_token_id,
           "bos_token_id": tok.bos_token_id, "pad_token_id": tok.pad_token_id}
    if cls_name.startswith("Remote"):
        sys.path.insert(0, str(HERE))
        from remote_code.configuration_remote import RemoteConfig
        from remote_code.modeling_remote import (
            RemoteForCausalLM,
            RemoteForSequenceClassification,
            RemoteModel,
        )

        RemoteConfig.register_for_auto_class()
        RemoteModel.register_for_auto_class("AutoModel")
        RemoteForCausalLM.register_for_auto_class("AutoModelForCausalLM")
        RemoteForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
        config = RemoteConfig(**kwargs, **ids)
        config.auto_map = {"AutoModel": "modeling_remote.RemoteModel",
                           "AutoModelForSequenceClassification": "modeling_remote.RemoteForSequenceClassification"}
        model_cls: Any = RemoteForCausalLM
    else:
        model_cls = getattr(transformers, cls_name)
        config = model_cls.config_class(**kwargs, **ids)
    if "SequenceClassification" in cls_name:
        config.pad_token_id = None  # the real reward models' configs have none: the trainer sets it
    torch.manual_seed(0)
    model = model_cls(config).to(dtype=torch.bfloat16)
    for module in model.modules():  # TRL's init_weights_tiny_model
        if isinstance(module, nn.Linear):
            if module.bias is not None:
                nn.init.zeros_(module.bias)
            nn.init.xavier_uniform_(module.weight)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    if cls_name == "NemotronHForCausalLM":  # as TRL's generator: the Mamba mixer keeps A_log and D in float32
        for i, kind in enumerate(config.layers_block_type):
            if kind == "mamba":
                mixer = model.model.layers[i].mixer
                mixer.A_log.data = mixer.A_log.data.float()
                mixer.D.data = mixer.D.data.float()
    model.save_pretrained(out)
    tok.save_pretrained(out)


def build_zen(out: Path) -> None:
    """TRL's zen script, its ``push_to_hub(repo_id, config_name=...)`` written to ``out/<config_name>``."""
    import importlib.util

    from datasets import DatasetDict
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()

    spec = importlib.util.spec_from_file_location("generate_zen_dataset", HERE / "generate_zen_dataset.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    original = DatasetDict.push_to_hub

    def save(self: DatasetDict, repo_id: str, config_name: str = "default", **_: Any) -> None:
        self.save_to_disk(str(out / config_name))

    DatasetDict.push_to_hub = save  # type: ignore[method-assign]
    try:
        module.main(0.1, True, f"{ORG}/zen")
    finally:
        DatasetDict.push_to_hub = original  # type: ignore[method-assign]


def fingerprint() -> str:
    """Changes when this file, the zen script or the installed transformers/trl change."""
    import transformers
    import trl

    h = hashlib.sha256()
    for f in sorted([Path(__file__), HERE / "generate_zen_dataset.py", *(HERE / "remote_code").glob("*.py")]):
        h.update(f.read_bytes())
    h.update(f"{transformers.__version__} {trl.__version__}".encode())
    return h.hexdigest()[:16]


def build_all(root: Path) -> Path:
    """The Hub cache (``root/hub``) and zen folders (``root/zen``), built once per fingerprint; returns ``root``."""
    stamp = root / "complete.json"
    if stamp.exists():
        return root
    hub = root / "hub"
    for name in MODELS:
        repo = hub / f"models--{ORG}--{name}"
        build_model(name, repo / "snapshots" / REVISION)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(REVISION)
    build_zen(root / "zen")
    stamp.write_text(json.dumps(sorted(MODELS)))
    return root
