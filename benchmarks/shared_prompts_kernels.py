"""Shared prompts by packing kernel: one forward and backward of a group's completions, unpacked against packed
through a dense mask and through FlexAttention block masks, side by side in one run.

    python benchmarks/shared_prompts_kernels.py [--prompt 512 --completion 4096 --generations 8 --repeats 3]
    python benchmarks/shared_prompts_kernels.py --small          (a toy model and batch: the plumbing, on a CPU)

A random Qwen2.5-0.5B-shaped model built from a config (``--small``: hidden 64, 2 layers, vocabulary 512), bf16
weights under LoRA r=16 on CUDA (fp32 full weights on a CPU), gradient checkpointing on. One prompt of
``--prompt`` tokens and ``--generations`` completions of ``--completion`` tokens; each way runs
:func:`grpo_core.policy.logprobs.completion_logprobs` and a backward of the summed log-probs: ``unpacked`` (the
prompt in every row), ``dense_mask`` and ``flex_attention`` (one packed row, all completions behind the prompt).
FlexAttention trains on CUDA only (torch runs no flex backward on a CPU): there it is left out. The time is the
best of ``--repeats`` after a first call (flex compiles on it), the peak ``torch.cuda.max_memory_allocated``
(none on a CPU). Each packed way's log-probs are compared with the unpacked ones (max |gap|). The last line is a
``summary`` with each way's time and peak as ratios to ``unpacked``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_core.generation.transformers_backend import sampling_autocast  # noqa: E402
from grpo_core.policy.logprobs import completion_logprobs  # noqa: E402
from grpo_core.policy.models import set_compute_dtype  # noqa: E402
from grpo_core.policy.packed_attention import DENSE, FLEX, use_flex_packing  # noqa: E402


def build(small: bool, device: torch.device) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = (dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2) if small else
             dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2))
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**shape, tie_word_embeddings=True, attn_implementation="sdpa"))
    if device.type == "cuda":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model.to(device, torch.bfloat16), LoraConfig(r=16, target_modules="all-linear"))
        set_compute_dtype(model, "bfloat16")
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    return model.train()


def one_pass(model: Any, ids: torch.Tensor, mask: torch.Tensor, k: int, share: bool) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    with sampling_autocast(model):
        logps, _ = completion_logprobs(model, ids, mask, k, share_prompts=share,
                                       completions_per_row=ids.size(0) if share else None)
    logps.float().sum().backward()
    return logps.detach().float()


def measure(model: Any, ids: torch.Tensor, mask: torch.Tensor, k: int, way: str, repeats: int
            ) -> tuple[float, float | None, torch.Tensor]:
    """(best seconds, peak GiB or None, log-probs) of ``way`` after one untimed call."""
    use_flex_packing(model, way == FLEX)
    cuda = ids.device.type == "cuda"
    logps = one_pass(model, ids, mask, k, way != "unpacked")
    best, peak = float("inf"), None
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        one_pass(model, ids, mask, k, way != "unpacked")
        if cuda:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() / 2**30
        best = min(best, time.perf_counter() - start)
    return best, peak, logps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--completion", type=int, default=4096)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--small", action="store_true", help="a toy model and batch (prompt 24, completions 16 x 4)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args(argv)
    if a.small:
        a.prompt, a.completion, a.generations = 24, 16, 4
    device = torch.device(a.device)
    model = build(a.small, device)
    g = torch.Generator().manual_seed(0)
    vocab = model.get_input_embeddings().weight.shape[0]
    prompt = torch.randint(2, vocab, (1, a.prompt), generator=g).expand(a.generations, -1)
    ids = torch.cat([prompt, torch.randint(2, vocab, (a.generations, a.completion), generator=g)], 1).to(device)
    mask = torch.ones_like(ids)
    ways = ["unpacked", DENSE] + ([FLEX] if device.type != "cpu" else [])
    results = {way: measure(model, ids, mask, a.completion, way, a.repeats) for way in ways}
    base_time, base_peak, base_logps = results["unpacked"]
    print(f"{a.generations} x {a.completion} tokens behind a {a.prompt}-token prompt on {device.type}"
          f"{' (' + torch.cuda.get_device_name(device) + ')' if device.type == 'cuda' else ''}")
    parts = []
    for way, (seconds, peak, logps) in results.items():
        gap = (logps - base_logps).abs().max().item()
        shown = "" if peak is None else f", peak {peak:.2f} GiB"
        print(f"  {way:<15} {seconds * 1e3:9.1f} ms{shown}, max |log-prob gap| to unpacked {gap:.2e}")
        if way != "unpacked":
            ratio = f"{way}_time={seconds / base_time:.3f}"
            parts.append(ratio + ("" if peak is None or base_peak is None else f" {way}_peak={peak / base_peak:.3f}"))
    print("summary " + " ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
