"""Loading the policy (any transformers causal LM; LoRA via peft; QLoRA via bitsandbytes 4-bit), the
reference model for the KL term, and saving adapters / merged models in the Hugging Face layout.

``load_model_and_tokenizer(cfg)``  -> (model, tokenizer): dtype, 4-bit NF4, LoRA, gradient checkpointing,
                                      pad token, left padding (generation pads on the left).
``reference_model(model, cfg)``    -> context manager yielding a model for reference log-probs
                                      (LoRA: the same model with the adapter disabled; full fine-tune:
                                      a frozen copy loaded once from ``cfg.model.name_or_path``).
``save_model(model, tokenizer, out_dir, merged=False)`` -> the adapter (LoRA) or the full model;
                                      ``merged=True`` writes LoRA merged into 16/32-bit base weights.
"""

from __future__ import annotations

import contextlib
import copy
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from grpo_core.config import RunConfig

_REFERENCES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def torch_dtype(name: str) -> Any:
    """``"bfloat16"`` -> ``torch.bfloat16``; ``"auto"`` stays ``"auto"`` (the checkpoint's own dtype)."""
    import torch

    return name if name == "auto" else getattr(torch, name)


def _load_kwargs(cfg: RunConfig) -> dict[str, Any]:
    m = cfg.model
    kwargs: dict[str, Any] = {"dtype": torch_dtype(m.dtype), "trust_remote_code": m.trust_remote_code}
    if m.revision:
        kwargs["revision"] = m.revision
    if m.attn_implementation:
        kwargs["attn_implementation"] = m.attn_implementation
    q = cfg.quantization
    if q.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type=q.quant_type,
            bnb_4bit_compute_dtype=torch_dtype(q.compute_dtype),
            bnb_4bit_use_double_quant=q.double_quant,
        )
        if m.dtype == "auto":
            kwargs["dtype"] = torch_dtype(q.compute_dtype)
    return kwargs


def load_tokenizer(cfg: RunConfig) -> Any:
    """The tokenizer with a pad token (eos when it has none) and left padding."""
    from transformers import AutoTokenizer

    m = cfg.model
    with _naming_the_model(m.name_or_path):
        tok = AutoTokenizer.from_pretrained(m.name_or_path, revision=m.revision, trust_remote_code=m.trust_remote_code)
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ValueError(f"model.name_or_path: tokenizer of {m.name_or_path!r} has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


@contextlib.contextmanager
def _naming_the_model(name: str) -> Iterator[None]:
    """Loading errors (offline, no such repo, no weights) as one line naming ``model.name_or_path``."""
    try:
        yield
    except (OSError, ValueError) as exc:  # transformers raises both for missing/unusable files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise OSError(f"model.name_or_path: cannot load {name!r}: {first}") from exc


def load_base_model(cfg: RunConfig) -> Any:
    """The causal LM of ``[model]`` (dtype, revision, attention, 4-bit) without LoRA or checkpointing."""
    from transformers import AutoModelForCausalLM

    with _naming_the_model(cfg.model.name_or_path):
        return AutoModelForCausalLM.from_pretrained(cfg.model.name_or_path, **_load_kwargs(cfg))


def _enable_checkpointing(model: Any, cfg: RunConfig) -> None:
    try:
        from grpo_core.checkpointing import enable_gradient_checkpointing
    except ImportError:  # the memory module not installed: transformers' own (non-reentrant) checkpointing
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return
    tile = cfg.model.mlp_chunk_tokens
    enable_gradient_checkpointing(model, offload_to_cpu=cfg.model.offload_activations,
                                  mlp_chunk_tokens="auto" if tile is None else tile)


def load_model_and_tokenizer(cfg: RunConfig) -> tuple[Any, Any]:
    """The trainable policy and its tokenizer, as ``cfg`` describes (see the module docs)."""
    tokenizer = load_tokenizer(cfg)
    model = load_base_model(cfg)
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    if cfg.lora.enabled:
        from peft import get_peft_model

        for p in model.parameters():
            p.requires_grad_(False)
        if cfg.model.gradient_checkpointing:
            model.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still need a grad path
        model = get_peft_model(model, lora_config(cfg))
    if cfg.model.gradient_checkpointing:
        _enable_checkpointing(model, cfg)
    model.train()
    return model, tokenizer


def lora_config(cfg: RunConfig) -> Any:
    """The ``peft.LoraConfig`` of ``[lora]`` (what this trainer wraps the model with, and what the TRL
    backend hands to ``GRPOTrainer(peft_config=...)``)."""
    from peft import LoraConfig

    lo = cfg.lora
    return LoraConfig(r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules,
                      task_type="CAUSAL_LM")


def is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


@contextlib.contextmanager
def reference_model(model: Any, cfg: RunConfig) -> Iterator[Any]:
    """Yield a model whose log-probs are the KL reference (see the module docs); use under ``torch.no_grad()``."""
    if is_peft(model):
        with model.disable_adapter():
            yield model
        return
    ref = _REFERENCES.get(model)
    if ref is None:
        ref = load_base_model(cfg)
        ref.requires_grad_(False)
        ref.eval()
        ref.to(next(model.parameters()).device)
        _REFERENCES[model] = ref
    yield ref


def _unwrap(model: Any) -> Any:
    return getattr(model, "_orig_mod", model)  # torch.compile wrapper


def _is_quantized(model: Any) -> bool:
    base = model.get_base_model() if is_peft(model) else model
    return bool(getattr(base, "is_loaded_in_4bit", False) or getattr(base, "quantization_method", None))


def merged_copy(model: Any) -> Any:
    """A plain transformers model with the LoRA weights merged in; ``model`` itself is left untouched.

    A quantized base is reloaded in its compute dtype from the adapter's base model (the usual QLoRA
    export: merging into 4-bit weights would re-quantize the update away).
    """
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    if not _is_quantized(model):
        return copy.deepcopy(model).merge_and_unload()
    from transformers import AutoModelForCausalLM

    peft_cfg = model.peft_config[model.active_adapter]
    compute = getattr(model.get_base_model().config, "quantization_config", None)
    dtype = getattr(compute, "bnb_4bit_compute_dtype", None) or "auto"
    base = AutoModelForCausalLM.from_pretrained(peft_cfg.base_model_name_or_path, dtype=dtype)
    fresh = get_peft_model(base, copy.deepcopy(peft_cfg))
    set_peft_model_state_dict(fresh, get_peft_model_state_dict(model))
    return fresh.merge_and_unload()


def save_model(model: Any, tokenizer: Any, out_dir: str | Path, *, merged: bool = False) -> Path:
    """Write ``out_dir`` loadable by ``from_pretrained``: the adapter (LoRA: ``PeftModel`` /
    ``AutoPeftModelForCausalLM``) or the full model; ``merged=True`` writes the LoRA-merged full model."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = _unwrap(model)
    if merged and is_peft(model):
        merged_copy(model).save_pretrained(out)
    else:
        model.save_pretrained(out)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    return out


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    """The parameters the optimizer updates."""
    return [p for p in model.parameters() if p.requires_grad]
