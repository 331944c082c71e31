"""The group sampler's fixed-address decode step: a preallocated KV cache, and the one-token forward over it,
run eagerly or replayed as a CUDA graph (``[generation] decode = "static"`` / ``"cuda_graph"``).

Every tensor a decode step reads or writes has a fixed shape and address for the whole rollout, so the step can
be captured once and replayed:

* :class:`StaticKVCache` holds, per layer, keys and values ``[rows, kv_heads, prompt + max_new_tokens,
  head_dim]``, filled from the prefill's cache (already repeated for each group); a step writes its column at
  ``write_at``, a device tensor, so a replay writes the next column;
* :class:`StaticStep` owns the step's inputs: the token ``[rows, 1]``, its position ``[rows, 1]`` and a 4-D
  attention mask ``[rows, 1, 1, length]`` that the model takes as it is (transformers builds no mask from a
  4-D one): bool for ``sdpa``, additive (0 or the dtype's minimum) for ``eager``. Rows stay in the batch to the
  end (a finished row decodes padding; the sampler discards it);
* with ``graph=True`` (CUDA), the forward is warmed up on a side stream and captured in a
  ``torch.cuda.CUDAGraph`` at the first step; each step then replays it: one launch for the whole forward, no
  Python or allocator work in between. The forward's intermediate tensors live in the graph's private pool
  (the same addresses on each replay); the logits it returns are overwritten by the next replay, so the
  sampler reads them first. Autocast's weight-cast cache is off while capturing (a cast cached during
  capture would hold values never computed); the graph is captured per rollout and freed after it, so
  weights updated in place between rollouts are read as they are.

What stays outside the graph, on the device and without a host synchronisation: sampling, the mask column,
the position and write-column increments. :func:`static_decode_problem` says why a model cannot decode this
way (None when it can): only plain full-attention layers (no sliding window, no linear-attention or
recurrent state) through ``sdpa`` or ``eager`` attention qualify.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

ATTENTION_KERNELS = ("sdpa", "eager")  # the ones that take the 4-D mask of a decode step as it is


def text_config(model: Any) -> Any:
    """The (text) config of ``model``, a peft wrapper's base model's included."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = base.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """Each layer's ``(keys, values)`` of a prefill's cache when every layer is a plain full-attention one
    (transformers' ``DynamicLayer``, or the older ``key_cache`` lists), else None."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
            return None
        pairs = [(getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in layers]
    elif hasattr(cache, "key_cache") and hasattr(cache, "value_cache"):
        pairs = list(zip(cache.key_cache, cache.value_cache, strict=True))
    else:
        return None
    return pairs if all(isinstance(t, torch.Tensor) for pair in pairs for t in pair) else None


def static_decode_problem(model: Any, cache: Any, length: int) -> str | None:
    """Why ``model`` (whose prefill returned ``cache``) cannot decode over a static cache of ``length``
    columns, in a few words; None when it can."""
    config = text_config(model)
    kernel = getattr(config, "_attn_implementation", None)
    if kernel not in ATTENTION_KERNELS:
        return f"attention {kernel!r} (a static cache needs one of {', '.join(ATTENTION_KERNELS)})"
    kinds = set(getattr(config, "layer_types", None) or ())
    window = getattr(config, "sliding_window", None)
    if kinds - {"full_attention"}:
        return f"layer types {sorted(kinds - {'full_attention'})}"
    if not kinds and isinstance(window, int) and getattr(config, "use_sliding_window", True) and window < length:
        return f"a sliding window of {window} tokens"
    if cache_layers(cache) is None:
        return f"a cache of {[type(layer).__name__ for layer in getattr(cache, 'layers', [])] or type(cache).__name__}"
    return None


def _dynamic_cache_class() -> type:
    from transformers import DynamicCache  # heavy optional dependency: imported when a static rollout starts

    return DynamicCache


class StaticKVCache:
    """A KV cache whose tensors never move: ``rows = prefill rows * repeat``, ``length`` columns per layer.

    Built by :func:`static_kv_cache` (a subclass of the installed transformers' ``DynamicCache``, so the
    model treats it as a cache object); ``update`` writes the step's keys and values at column ``write_at``
    and returns the whole buffers (the 4-D mask hides the columns not written yet)."""

    key_buffers: list[torch.Tensor]
    value_buffers: list[torch.Tensor]
    write_at: torch.Tensor
    seen: int

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.key_buffers[layer_idx], self.value_buffers[layer_idx]
        keys.index_copy_(2, self.write_at, key_states)
        values.index_copy_(2, self.write_at, value_states)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen

    def advance(self) -> None:
        """The next step writes the next column."""
        self.write_at.add_(1)
        self.seen += 1


def static_kv_cache(layers: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> StaticKVCache:
    """A :class:`StaticKVCache` holding the prefill's ``layers`` (one row per completion) in its first columns,
    with room for ``length`` columns in all."""
    cls = type("StaticKVCache", (StaticKVCache, _dynamic_cache_class()), {})
    cache = cls()
    cache.key_buffers, cache.value_buffers = [], []
    for keys, values in layers:
        for source, out in ((keys, cache.key_buffers), (values, cache.value_buffers)):
            rows, heads, filled, dim = source.shape
            buffer = source.new_zeros(rows, heads, length, dim)
            buffer[:, :, :filled] = source
            out.append(buffer)
    filled = layers[0][0].size(2)
    cache.write_at = torch.tensor([filled], dtype=torch.long, device=layers[0][0].device)
    cache.seen = filled
    return cache


def _mask_dtype(model: Any) -> torch.dtype:
    """The dtype transformers gives an additive mask: that of the embeddings the forward starts from."""
    return model.get_input_embeddings().weight.dtype


@contextlib.contextmanager
def _no_autocast_cache(device: torch.device) -> Iterator[None]:
    """The current autocast, with its cast cache off (required while capturing a CUDA graph)."""
    if not torch.is_autocast_enabled(device.type):
        yield
        return
    with torch.autocast(device.type, dtype=torch.get_autocast_dtype(device.type), cache_enabled=False):
        yield


class StaticStep:
    """One decode step over a :class:`StaticKVCache`: ``feed(token)`` then ``step()`` gives the next logits
    ``[rows, vocabulary]`` (float32). ``graph=True`` replays the forward as a CUDA graph (module docs)."""

    def __init__(self, model: Any, cache: StaticKVCache, cache_arg: str, prompt_mask: torch.Tensor,
                 next_position: torch.Tensor, length: int, *, graph: bool = False, strict: bool = False,
                 warmup: int = 2):
        rows, filled = prompt_mask.shape
        device = prompt_mask.device
        self.model, self.cache, self.cache_arg, self.column = model, cache, cache_arg, filled
        self.token = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.position = next_position.view(rows, 1).clone()
        allowed = torch.zeros(rows, 1, 1, length, dtype=torch.bool, device=device)
        allowed[:, 0, 0, :filled] = prompt_mask.bool()
        if getattr(text_config(model), "_attn_implementation", None) == "sdpa":
            self.mask, self.open = allowed, True
        else:  # eager adds the mask to the scores
            dtype = _mask_dtype(model)
            self.mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(~allowed,
                                                                                          torch.finfo(dtype).min)
            self.open = 0.0
        self.graph_wanted, self.strict, self.warmup = graph, strict, warmup
        self.graph: Any = None
        self.capture_error: Exception | None = None  # why capturing failed (the steps then run eagerly)
        self.logits: torch.Tensor | None = None

    def feed(self, token: torch.Tensor) -> None:
        """The tokens the next step decodes (one per row); their column is opened in the mask."""
        self.token.copy_(token.view(-1, 1))
        self.mask[:, :, :, self.column] = self.open

    def _forward(self) -> torch.Tensor:
        out = self.model(input_ids=self.token, attention_mask=self.mask, position_ids=self.position, use_cache=True,
                         **{self.cache_arg: self.cache})
        return out.logits[:, -1].float()

    def _capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: lazy initialisations happen outside the capture
            for _ in range(self.warmup):
                self._forward()  # writes this step's column with this step's inputs: the replay rewrites it
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with _no_autocast_cache(self.token.device), torch.cuda.graph(self.graph):
            self.logits = self._forward()

    def step(self) -> torch.Tensor:
        """The logits of the fed tokens; the cache, position and mask column then move one step on."""
        if self.graph_wanted and self.graph is None:
            self.graph_wanted = False
            try:
                self._capture()
            except Exception as error:  # a forward that cannot be captured (a host sync in it): run it eagerly
                if self.strict:
                    raise
                self.graph, self.capture_error = None, error
        if self.graph is not None:
            self.graph.replay()
            logits = self.logits
        else:
            logits = self._forward()
        self.cache.advance()
        self.position.add_(1)
        self.column += 1
        return logits
