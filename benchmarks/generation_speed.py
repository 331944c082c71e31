"""Sampling speed: the group sampler's decode modes against plain ``model.generate``, side by side in one run.

    .venv/bin/python benchmarks/generation_speed.py [--prompts 2 --generations 8 --length 64 --repeats 2]
    .venv/bin/python benchmarks/generation_speed.py --tiny            # a random tiny Llama, no download
    python benchmarks/generation_speed.py --device cuda --dtype bfloat16 --model-dir DIR

The same left-padded batch (chat-templated addition questions, each repeated ``--generations`` times; random
prompts of three lengths with ``--tiny``), the same temperature-1 sampling with nothing else in the sampler,
the same EOS ids. ``generate`` prefills every row and decodes every row to the end;
:func:`grpo_core.generation.group_sampling.sample_groups` prefills each prompt once and decodes with
``--modes``: ``dynamic`` (finished rows leave the batch), ``static`` (a preallocated cache, every row kept),
``cuda_graph`` (``static`` with each step replayed as a CUDA graph; CUDA only, the default there).
Tokens/s counts completion tokens up to and including EOS (what the trainer uses); the best of ``--repeats``
runs is reported for each, with its ratio to ``model.generate``. The last line is a ``summary``.

``--only NAME`` times one of them (``model.generate`` or ``sampler``, the sampler in the mode the trainer would
pick on the device) and prints ``summary sampler=NAME tokens_per_s=.. tokens=.. seconds=..``
(``benchmarks/gpu_vs_trl.py`` runs each in its own process); ``--plain-prompts`` uses the questions as they are,
for a tokenizer without a chat template.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch


def _tiny(device: str, dtype: torch.dtype, vocab: int, hidden: int, layers: int) -> tuple[Any, Any, list[int], int]:
    """A random Llama (no tokenizer: random prompt ids of three lengths, left-padded), its EOS ids and pad id."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                         num_attention_heads=max(1, hidden // 64), num_key_value_heads=max(1, hidden // 128),
                         max_position_embeddings=4096, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    model = LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()
    return model, None, [1], 0


def _prompts(tok: Any, n: int, device: str, vocab: int, plain: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if tok is None:
        lengths = [12 + 5 * (i % 3) for i in range(n)]
        ids = torch.zeros(n, max(lengths), dtype=torch.long)
        mask = torch.zeros_like(ids)
        gen = torch.Generator().manual_seed(0)
        for i, length in enumerate(lengths):
            ids[i, -length:] = torch.randint(3, vocab, (length,), generator=gen)
            mask[i, -length:] = 1
        return ids.to(device), mask.to(device)
    questions = [f"What is {10 + 7 * i} + {23 + 11 * i}? Explain briefly." for i in range(n)]
    prompts = questions if plain else [
        tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        for q in questions]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", default="")
    p.add_argument("--tiny", action="store_true", help="a random tiny Llama instead of SmolLM2-135M-Instruct")
    p.add_argument("--tiny-shape", default="1024,128,2", help="--tiny: vocabulary,hidden,layers")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--modes", default="", help="comma-separated sampler modes (default: dynamic,static and, "
                                               "on CUDA, cuda_graph)")
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--only", choices=("model.generate", "sampler"), default=None,
                   help="time this one alone (sampler: the mode the trainer picks on the device)")
    p.add_argument("--plain-prompts", action="store_true", help="no chat template: the questions as they are")
    a = p.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from grpo_core.generation.group_sampling import sample_groups
    from grpo_core.generation.transformers_backend import completion_mask_from_eos, end_of_turn_ids

    dtype = getattr(torch, a.dtype)
    modes = [m for m in (a.modes or "dynamic,static" + (",cuda_graph" if a.device == "cuda" else "")).split(",")]
    if a.only == "sampler":
        modes = ["cuda_graph" if a.device == "cuda" else "dynamic"]  # what decode = "auto" resolves to
    if a.tiny:
        vocab, hidden, layers = (int(x) for x in a.tiny_shape.split(","))
        model, tok, eos, pad = _tiny(a.device, dtype, vocab, hidden, layers)
        what = f"tiny Llama {a.tiny_shape}"
    else:
        if not a.model_dir:
            from grpo_core.smollm2 import fetch_smollm2

            a.model_dir = str(fetch_smollm2())
        tok = AutoTokenizer.from_pretrained(a.model_dir, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=dtype).to(a.device).eval()
        eos, pad, vocab = sorted({tok.eos_token_id, *end_of_turn_ids(tok)}), tok.pad_token_id, len(tok)
        what = a.model_dir
    prompt_ids, prompt_mask = _prompts(tok, a.prompts, a.device, vocab, a.plain_prompts)
    k = a.generations
    config = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.length,
                              eos_token_id=eos, pad_token_id=pad)

    def plain() -> torch.Tensor:
        out = model.generate(input_ids=prompt_ids.repeat_interleave(k, 0),
                             attention_mask=prompt_mask.repeat_interleave(k, 0), generation_config=config)
        return out[:, prompt_ids.size(1):]

    def sampler(mode: str) -> Any:
        return lambda: sample_groups(model, prompt_ids, prompt_mask, k, max_new_tokens=a.length, eos_ids=eos,
                                     pad_id=pad, decode=mode, strict=True)[0]

    def sync() -> None:
        if a.device == "cuda":
            torch.cuda.synchronize()

    runs = [("model.generate", plain)] + [(f"sampler {mode}", sampler(mode)) for mode in modes]
    if a.only:
        runs = runs[:1] if a.only == "model.generate" else runs[1:]
    results: dict[str, tuple[float, int, float]] = {}
    print(f"{what} on {a.device} ({a.dtype}), {a.prompts} prompts x {k} completions x {a.length} tokens, "
          f"threads={torch.get_num_threads()}")
    with torch.no_grad():
        for name, fn in runs:
            best = None
            for r in range(a.repeats):
                torch.manual_seed(r)
                sync()
                start = time.perf_counter()
                ids = fn()
                sync()
                seconds = time.perf_counter() - start
                tokens = int(completion_mask_from_eos(ids, eos)[0].sum())
                if best is None or tokens / seconds > best[0]:
                    best = (tokens / seconds, tokens, seconds)
            results[name] = best
            ratio = f"  x{best[0] / results['model.generate'][0]:.2f} generate" if "model.generate" in results else ""
            print(f"{name:<20} {best[0]:9.1f} tokens/s  ({best[1]} tokens in {best[2]:.2f} s){ratio}")
    if a.only:
        tps, tokens, seconds = results[runs[0][0]]
        print(f"summary sampler={a.only} tokens_per_s={tps:.1f} tokens={tokens} seconds={seconds:.3f}")
        return 0
    base = results["model.generate"][0]
    ratios = " ".join(f"{name.split()[-1]}={results[name][0] / base:.2f}" for name, _ in runs[1:])
    print(f"summary generation device={a.device} rows={a.prompts * k} length={a.length} generate_tps={base:.1f} "
          f"{' '.join(f'{n.split()[-1]}_tps={results[n][0]:.1f}' for n, _ in runs[1:])} speedup_vs_generate: {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
