"""Loading the policy (any transformers causal LM; LoRA via peft; QLoRA via bitsandbytes 4-bit), the
reference model for the KL term, and saving adapters / merged models in the Hugging Face layout.

``load_model_and_tokenizer(cfg)``  -> (model, tokenizer): dtype, 4-bit NF4, LoRA, gradient checkpointing,
                                      pad token, left padding (generation pads on the left), dropout off.
``prepare_policy(model, tok, cfg)`` -> the same for a model loaded elsewhere (the Python API; a ``PeftModel``
                                      keeps its adapter); ``model.adapter`` starts from a saved LoRA adapter.
``compute_dtype(model)``           -> the 16-bit dtype the forward runs in under autocast, or None.

Checkpoints: a folder or hub name, or a GGUF file (``name_or_path`` ending in ``.gguf``, or a folder plus
``gguf_file``), dequantized into a plain dense model by transformers' ``gguf`` support.

Precision: a full fine-tune keeps fp32 master weights. With ``dtype = "auto"`` a 16-bit checkpoint is
loaded, upcast to fp32 and its forwards run under ``torch.autocast`` in the checkpoint's dtype on an
accelerator (TRL's mixed precision; fp16 adds loss scaling in the trainer); an explicit 16-bit ``dtype``
on a full fine-tune is refused (pure 16-bit AdamW rounds small updates away). LoRA keeps the base in
its dtype and the adapters in fp32 (peft's default).

Dropout is switched off in the base model (TRL's ``disable_dropout``): GRPO's ratio compares the policy
with itself, and a random mask would make it differ from 1 on the same weights. LoRA's own dropout
(``lora.dropout``) stays as configured.
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

from grpo_core.adapter import attach_adapter
from grpo_core.atomic_folders import atomic_folder
from grpo_core.policy.fp32_head import cast_head_to_fp32
from grpo_core.policy.router_loss import router_loss_problem
from grpo_rewards.errors import ConfigError

PLANNED_AUTOCAST = "_grpo_autocast_planned"  # set_compute_dtype's mark: the autocast holds on any device

if TYPE_CHECKING:
    import torch

    from grpo_core.config import RunConfig

_REFERENCES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def torch_dtype(name: str) -> Any:
    """``"bfloat16"`` -> ``torch.bfloat16``; ``"auto"`` stays ``"auto"`` (the checkpoint's own dtype)."""
    import torch

    return name if name == "auto" else getattr(torch, name)


def gguf_source(cfg: RunConfig) -> tuple[str, str] | None:
    """``(folder, file)`` when ``[model]`` names a GGUF checkpoint (a ``.gguf`` path or ``gguf_file``), else None."""
    m = cfg.model
    gguf_file = getattr(m, "gguf_file", None)
    if gguf_file:
        return m.name_or_path, gguf_file
    path = Path(m.name_or_path).expanduser()
    if path.suffix.lower() == ".gguf":
        return str(path.parent), path.name
    return None


def _strip_gguf_quantization(model: Any) -> Any:
    """A dequantized GGUF model as a plain transformers model (trainable, ``save_pretrained``-able)."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for attr, value in (("hf_quantizer", None), ("is_quantized", False), ("quantization_method", None)):
        if hasattr(model, attr):
            setattr(model, attr, value)
    return model


def load_gguf_model(folder: str | Path, gguf_file: str, *, dtype: Any = "auto", **kwargs: Any) -> Any:
    """The causal LM in ``folder/gguf_file``, dequantized into dense weights of ``dtype`` (auto: fp32)."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        from transformers import GgufConfig

        kwargs.setdefault("quantization_config", GgufConfig(gguf_file=gguf_file, dequantize=True))
    except ImportError:  # older transformers always dequantize GGUF files
        pass
    dtype = torch.float32 if dtype == "auto" else dtype
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=gguf_file, dtype=dtype, **kwargs)
    model = _strip_gguf_quantization(model)
    packed = [n for n, mod in model.named_modules() if "gguf" in type(mod).__name__.lower()]
    if packed:
        raise ValueError(f"{gguf_file}: layers stayed GGUF-packed after loading ({packed[0]}, ...)")
    return model


def load_gguf_tokenizer(folder: str | Path, gguf_file: str, **kwargs: Any) -> Any:
    """The tokenizer (and chat template) stored in a GGUF file."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_file, **kwargs)


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
    gguf = gguf_source(cfg)
    with _naming_the_model(m.name_or_path):
        if gguf:
            tok = load_gguf_tokenizer(*gguf, trust_remote_code=m.trust_remote_code)
        else:
            tok = AutoTokenizer.from_pretrained(m.name_or_path, revision=m.revision,
                                                trust_remote_code=m.trust_remote_code)
    return ready_tokenizer(tok, m.name_or_path)


def ready_tokenizer(tok: Any, name: str) -> Any:
    """``tok`` made ready for generation: a pad token (eos when it has none), left padding (the side it had is
    what :func:`save_model` writes back)."""
    if not hasattr(tok, "_grpo_saved_padding_side"):
        tok._grpo_saved_padding_side = tok.padding_side  # what save_model writes back
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ValueError(f"model.name_or_path: tokenizer of {name!r} has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


class ModelLoadError(OSError, ValueError):
    """A model that cannot be loaded: an ``OSError`` (what the command line reports) and, as transformers raises
    for a model that needs ``trust_remote_code``, a ``ValueError``."""


@contextlib.contextmanager
def _naming_the_model(name: str) -> Iterator[None]:
    """Loading errors (offline, no such repo, no weights) as one line naming ``model.name_or_path``."""
    try:
        yield
    except (OSError, ValueError) as exc:  # transformers raises both for missing/unusable files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"model.name_or_path: cannot load {name!r}: {first}") from exc


def load_base_model(cfg: RunConfig) -> Any:
    """The causal LM of ``[model]`` (dtype, revision, attention, 4-bit) without LoRA or checkpointing."""
    from transformers import AutoModelForCausalLM

    gguf = gguf_source(cfg)
    with _naming_the_model(cfg.model.name_or_path):
        if gguf:
            kwargs = _load_kwargs(cfg)
            kwargs.pop("revision", None)
            return load_gguf_model(*gguf, **kwargs)
        return AutoModelForCausalLM.from_pretrained(cfg.model.name_or_path, **_load_kwargs(cfg))


def _master_weights(model: Any, cfg: RunConfig) -> None:
    """Full fine-tune: fp32 master weights, forwards under autocast in the checkpoint's 16-bit dtype on an
    accelerator (see the module docs); an explicit 16-bit ``dtype`` is refused."""
    import torch

    if cfg.lora.enabled or cfg.quantization.load_in_4bit:
        return
    if cfg.model.dtype in ("bfloat16", "float16"):
        raise ValueError(
            f"model.dtype: a full fine-tune in pure {cfg.model.dtype} has no fp32 master weights (AdamW's small "
            "updates round away); use dtype = \"auto\" (fp32 weights, 16-bit autocast on a GPU), \"float32\", "
            "or [lora] enabled = true")
    dtype = next(model.parameters()).dtype
    if dtype in (torch.bfloat16, torch.float16):
        model.float()
        model._grpo_autocast_dtype = dtype


def compute_dtype(model: Any) -> Any:
    """The dtype forwards run in under autocast (a 16-bit checkpoint fully fine-tuned on an accelerator, or the
    step planner's autocast of :func:`set_compute_dtype`), else None (no autocast: the weights' own dtype)."""

    base = _unwrap(model.get_base_model() if is_peft(model) else model)
    dtype = getattr(base, "_grpo_autocast_dtype", None)
    if dtype is None or (next(model.parameters()).device.type == "cpu" and not getattr(base, PLANNED_AUTOCAST, False)):
        return None
    return dtype


def base_config(model: Any) -> Any:
    """The transformers config of ``model`` (inside a peft or ``torch.compile`` wrapper)."""
    base = model.get_base_model() if is_peft(model) else model
    return _unwrap(base).config


def set_compute_dtype(model: Any, dtype: Any) -> None:
    """Run ``model``'s forwards under autocast in ``dtype`` (the step planner's choice for a 16-bit LoRA/QLoRA base on
    an accelerator; wherever the model is, so a CPU runs the same path under CPU autocast in tests). peft's LoRA
    layers then keep their 16-bit input instead of casting it to the adapter's fp32 (a copy per layer, and GEMMs
    off the tensor cores); autocast runs the adapter in ``dtype``."""

    dtype = torch_dtype(dtype) if isinstance(dtype, str) else dtype
    base = _unwrap(model.get_base_model() if is_peft(model) else model)
    base._grpo_autocast_dtype = dtype
    setattr(base, PLANNED_AUTOCAST, True)
    for module in model.modules():
        if hasattr(module, "cast_input_dtype_enabled"):  # peft's BaseTunerLayer
            module.cast_input_dtype_enabled = False


def uses_fp16(model: Any) -> bool:
    """Whether gradients flow through fp16 activations (autocast fp16 or an fp16 base under LoRA): the
    trainer then scales the loss (``torch.amp.GradScaler``)."""
    import torch

    base = model.get_base_model() if is_peft(model) else model
    if getattr(_unwrap(base), "_grpo_autocast_dtype", None) == torch.float16:
        return compute_dtype(model) == torch.float16
    return any(p.dtype == torch.float16 for p in model.parameters() if p.is_floating_point())


def _dropouts(model: Any) -> Any:
    """``(name, module, attribute)`` of every dropout probability above 0 in ``model``: a ``torch.nn.Dropout``'s
    ``p``, or the ``attention_dropout`` float an attention module hands to its kernel."""
    import torch

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Dropout) and module.p:
            yield name, module, "p"
        value = getattr(module, "attention_dropout", None)
        if isinstance(value, float) and value:
            yield name, module, "attention_dropout"


def disable_dropout(model: Any) -> int:
    """Dropout probability 0 in every ``torch.nn.Dropout`` and attention module of the base model (not
    LoRA's), the config left as it is (a saved model keeps its own); returns how many were changed."""
    count = 0
    for name, module, attribute in list(_dropouts(model)):
        if "lora_dropout" not in name:
            setattr(module, attribute, 0.0)
            count += 1
    return count


def has_active_dropout(model: Any) -> bool:
    """Whether a train-mode forward of ``model`` draws random numbers (a dropout above 0, LoRA's included)."""
    return next(_dropouts(model), None) is not None


def _enable_checkpointing(model: Any, cfg: RunConfig) -> None:
    try:
        from grpo_core.policy.activations import enable_gradient_checkpointing  # torch: when a model loads
    except ImportError:  # the memory module not installed: transformers' own (non-reentrant) checkpointing
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return
    tile = cfg.model.mlp_chunk_tokens
    enable_gradient_checkpointing(model, offload_to_cpu=cfg.model.offload_activations,
                                  mlp_chunk_tokens="auto" if tile is None else tile)


def prepare_base_model(model: Any, cfg: RunConfig, tokenizer: Any) -> None:
    """What every trainer backend does to the loaded base model before LoRA: fp32 master weights for a full
    fine-tune (see the module docs), dropout off, the tokenizer's pad token in the generation config."""
    _master_weights(model, cfg)
    disable_dropout(model)
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id


def load_model_and_tokenizer(cfg: RunConfig) -> tuple[Any, Any]:
    """The trainable policy and its tokenizer, as ``cfg`` describes (see the module docs)."""
    tokenizer = load_tokenizer(cfg)
    model = load_base_model(cfg)
    if cfg.model.adapter:  # a saved LoRA adapter on top: its weights are where training starts

        model = attach_adapter(model, cfg.model.adapter, file=cfg.path)
    return prepare_policy(model, tokenizer, cfg), tokenizer


def prepare_policy(model: Any, tokenizer: Any, cfg: RunConfig, peft_config: Any = None) -> Any:
    """A loaded model made the trainable policy: the base prepared (:func:`prepare_base_model`), LoRA from
    ``peft_config`` or ``[lora]`` (a ``PeftModel`` keeps its own adapter), gradient checkpointing, train mode."""
    peft = is_peft(model)
    base = model.get_base_model() if peft else model
    problem = router_loss_problem(cfg, base)
    if problem:
        raise ConfigError(f"{cfg.path}: {problem}")
    prepare_base_model(base, cfg, tokenizer)
    if cfg.model.cast_lm_head_to_fp32:
        cast_head_to_fp32(base)
    if peft or cfg.lora.enabled or peft_config is not None:
        from peft import get_peft_model

        base = model.get_base_model() if peft else model
        for name, p in base.named_parameters():  # a PeftModel's adapter trains (even one loaded for inference)
            p.requires_grad_(peft and ("lora_" in name or p.requires_grad))
        if cfg.model.gradient_checkpointing:
            base.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still need a grad path
        if not peft:
            model = get_peft_model(model, peft_config if peft_config is not None else lora_config(cfg))
    if cfg.model.gradient_checkpointing:
        _enable_checkpointing(model, cfg)
    model.train()
    return model


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
        disable_dropout(ref)
        ref.to(next(model.parameters()).dtype)  # the policy's master dtype: no KL from rounding alone
        if cfg.model.cast_lm_head_to_fp32:
            cast_head_to_fp32(ref)
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
        return _host_copy(model).merge_and_unload()
    from transformers import AutoModelForCausalLM

    peft_cfg = model.peft_config[model.active_adapter]
    compute = getattr(model.get_base_model().config, "quantization_config", None)
    dtype = getattr(compute, "bnb_4bit_compute_dtype", None) or "auto"
    base = AutoModelForCausalLM.from_pretrained(peft_cfg.base_model_name_or_path, dtype=dtype)
    fresh = get_peft_model(base, copy.deepcopy(peft_cfg))
    set_peft_model_state_dict(fresh, get_peft_model_state_dict(model))
    return fresh.merge_and_unload()


def _host_copy(model: Any) -> Any:
    """A deep copy of ``model`` with every parameter and buffer in host memory: the device holds no second
    copy (each tensor is copied to the host directly, never duplicated on the device first)."""
    import torch

    memo: dict[int, Any] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        if id(tensor) in memo:
            continue
        host = tensor.detach().to("cpu", copy=True)
        memo[id(tensor)] = torch.nn.Parameter(host, requires_grad=tensor.requires_grad) \
            if isinstance(tensor, torch.nn.Parameter) else host
    return copy.deepcopy(model, memo)


@contextlib.contextmanager
def _as_published(model: Any, tokenizer: Any) -> Iterator[None]:
    """Training-only settings undone while saving: ``use_cache`` (off under gradient checkpointing) and the
    tokenizer's padding side (left for generation), in its config and in a fast tokenizer's
    ``tokenizer.json``."""
    configs = [getattr(m, "config", None) for m in (model, getattr(model, "get_base_model", lambda: None)())]
    configs = [c for c in configs if c is not None and getattr(c, "use_cache", None) is False]
    side = getattr(tokenizer, "padding_side", None)
    for c in configs:
        c.use_cache = True
    if tokenizer is not None and hasattr(tokenizer, "_grpo_saved_padding_side"):
        tokenizer.padding_side = tokenizer._grpo_saved_padding_side
    rust = getattr(tokenizer, "_tokenizer", None)  # a fast tokenizer keeps its last padding in tokenizer.json
    if rust is not None and getattr(rust, "padding", None) is not None:
        rust.no_padding()  # the next padded call sets it again
    try:
        yield
    finally:
        for c in configs:
            c.use_cache = False
        if tokenizer is not None and side is not None:
            tokenizer.padding_side = side


def save_model(model: Any, tokenizer: Any, out_dir: str | Path, *, merged: bool = False) -> Path:
    """Write ``out_dir`` loadable by ``from_pretrained``: the adapter (LoRA: ``PeftModel`` /
    ``AutoPeftModelForCausalLM``) or the full model; ``merged=True`` writes the LoRA-merged full model.
    Atomic: written beside ``out_dir`` and renamed into place when complete, so a save killed or failing midway
    (a full disk) leaves no empty or partial ``out_dir`` (an earlier one stays as it was)."""
    out = Path(out_dir)
    model = _unwrap(model)
    with atomic_folder(out) as tmp, _as_published(model, tokenizer):
        if merged and is_peft(model):
            merged_copy(model).save_pretrained(tmp)
        else:
            model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return out


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    """The parameters the optimizer updates."""
    return [p for p in model.parameters() if p.requires_grad]
