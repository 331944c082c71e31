"""Sampling speed on SmolLM2-135M-Instruct: the shared-prefill group sampler against plain ``model.generate``.

    .venv/bin/python benchmarks/generation_speed.py [--prompts 2 --generations 8 --length 64 --repeats 2]

The same left-padded batch (chat-templated addition questions, each repeated ``--generations`` times),
the same temperature-1 sampling with nothing else in the sampler, the same EOS ids. ``generate`` prefills
every row and decodes every row to the end; :func:`grpo_core.generation.group_sampling.sample_groups` prefills each
prompt once and drops rows as they finish. Tokens/s counts completion tokens up to and including EOS
(what the trainer uses); the best of ``--repeats`` runs is reported for each.

``--only NAME`` times one of them (``benchmarks/gpu_vs_trl.py`` runs each in its own process) and prints
``summary sampler=NAME tokens_per_s=.. tokens=.. seconds=..``; ``--device cuda --dtype bfloat16`` samples on the
GPU (each run ends after a ``torch.cuda.synchronize()``); ``--plain-prompts`` uses the questions as they are, for
a tokenizer without a chat template.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

SAMPLERS = ("model.generate", "shared prefill")


def best_rate(fn: Callable[[], torch.Tensor], eos: list[int], repeats: int, device: str) -> tuple[float, int, float]:
    """``(tokens/s, tokens, seconds)`` of the fastest of ``repeats`` calls of ``fn`` (seeded 0, 1, ...); tokens
    counted up to and including EOS."""
    from grpo_core.generation.transformers_backend import completion_mask_from_eos

    best = None
    for r in range(repeats):
        torch.manual_seed(r)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        ids = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        tokens = int(completion_mask_from_eos(ids, eos)[0].sum())
        if best is None or tokens / seconds > best[0]:
            best = (tokens / seconds, tokens, seconds)
    assert best is not None
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", default="")
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--only", choices=SAMPLERS, default=None, help="time this sampler alone")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--plain-prompts", action="store_true", help="no chat template: the questions as they are")
    a = p.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from grpo_core.generation.group_sampling import sample_groups
    from grpo_core.generation.transformers_backend import end_of_turn_ids

    if not a.model_dir:
        from grpo_core.smollm2 import fetch_smollm2

        a.model_dir = str(fetch_smollm2())
    tok = AutoTokenizer.from_pretrained(a.model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=getattr(torch, a.dtype)).to(a.device).eval()
    eos = sorted({tok.eos_token_id, *end_of_turn_ids(tok)})
    questions = [f"What is {10 + 7 * i} + {23 + 11 * i}? Explain briefly." for i in range(a.prompts)]
    prompts = questions if a.plain_prompts else [
        tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        for q in questions]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(a.device)
    k = a.generations
    config = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.length,
                              eos_token_id=eos, pad_token_id=tok.pad_token_id)

    def plain() -> torch.Tensor:
        out = model.generate(input_ids=enc["input_ids"].repeat_interleave(k, 0),
                             attention_mask=enc["attention_mask"].repeat_interleave(k, 0), generation_config=config)
        return out[:, enc["input_ids"].size(1):]

    def shared() -> torch.Tensor:
        return sample_groups(model, enc["input_ids"], enc["attention_mask"], k, max_new_tokens=a.length,
                             eos_ids=eos, pad_id=tok.pad_token_id)[0]

    calls = {"model.generate": plain, "shared prefill": shared}
    results = {}
    with torch.no_grad():
        for name in [a.only] if a.only else SAMPLERS:
            results[name] = best = best_rate(calls[name], eos, a.repeats, a.device)
            print(f"{name:<15} {best[0]:7.1f} tokens/s  ({best[1]} tokens in {best[2]:.2f} s)")
    if a.only:
        tps, tokens, seconds = results[a.only]
        print(f"summary sampler={a.only.replace(' ', '_')} tokens_per_s={tps:.1f} tokens={tokens} seconds={seconds:.3f}")
        return 0
    ratio = results["shared prefill"][0] / results["model.generate"][0]
    print(f"summary generation rows={a.prompts * k} length={a.length} threads={torch.get_num_threads()} "
          f"generate_tps={results['model.generate'][0]:.1f} shared_tps={results['shared prefill'][0]:.1f} "
          f"speedup={ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
