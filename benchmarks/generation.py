"""Generation throughput: the same model, prompts and sampling parameters through Hugging Face
``model.generate``, this toolkit's transformers backend and its vLLM backend (colocated engine, and with
``--server-url`` a ``vllm serve`` server of the same model, ``vllm_mode = "server"``).

Each path gets one untimed warm-up call (for vLLM that includes the engine's first full weight sync),
then ``--repeats`` timed calls; tokens are the completion tokens generated (up to and including EOS),
so paths whose samples end earlier are not favoured. Engine start-up is reported on its own.

    .venv-vllm/bin/python benchmarks/generation.py                    # SmolLM2-135M-Instruct (cached fetch)
    .venv-vllm/bin/python benchmarks/generation.py --model DIR --prompts 16 --num-generations 8

Last line: ``summary backend=vllm tokens_per_s=.. hf_tokens_per_s=.. ratio=..`` (ratio: vLLM over HF
``generate``; ``server_tokens_per_s=..`` added with ``--server-url``). Runs in the vLLM environment
(``bash scripts/setup.sh --vllm``); the server is started as docs/vllm.md says.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

QUESTIONS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?",
    "Betty is saving money for a new wallet which costs $100. She has only half of the money she needs. "
    "How much more money does Betty need to buy the wallet?",
    "James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?",
]


def run_config(model: str, args: argparse.Namespace, tmp: Path, server_url: str = "") -> Any:
    import json

    from grpo_core.config import config_from_dict

    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": q}) + "\n" for q in QUESTIONS))
    return config_from_dict({
        "model": {"name_or_path": model, "gradient_checkpointing": False},
        "data": {"source": str(data), "max_prompt_length": 256},
        "generation": {"backend": "vllm", "num_generations": args.num_generations,
                       "max_completion_length": args.max_tokens, "temperature": args.temperature,
                       **({"vllm_mode": "server", "vllm_server_url": server_url} if server_url else {})},
        "rewards": {"fmt": {"use": "xml_count"}},
        "logging": {"output_dir": str(tmp / "run")},
    })


def timed(label: str, call: Any, repeats: int) -> tuple[float, int]:
    call()  # warm-up
    seconds, tokens = 0.0, 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens += call()
        seconds += time.perf_counter() - start
    print(f"{label:<22} {tokens:>7} tokens {seconds:>8.2f} s {tokens / seconds:>9.1f} tokens/s", flush=True)
    return tokens / seconds, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model folder (default: SmolLM2-135M-Instruct, fetched once)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--server-url", default="", help="also time a `vllm serve` server of the same model here")
    args = parser.parse_args()

    import tempfile

    import torch

    from grpo_core.data import format_prompt
    from grpo_core.generation.transformers_backend import TransformersBackend, completion_mask_from_eos
    from grpo_core.policy.models import load_model_and_tokenizer

    model_dir = args.model
    if model_dir is None:
        from grpo_core.smollm2 import fetch_smollm2

        model_dir = str(fetch_smollm2())
    with tempfile.TemporaryDirectory() as tmp:
        cfg = run_config(model_dir, args, Path(tmp))
        model, tok = load_model_and_tokenizer(cfg)
        model.eval()
        questions = (QUESTIONS * args.prompts)[: args.prompts]
        prompts = [format_prompt({"prompt": q}, cfg.data, tok) for q in questions]
        n = args.num_generations
        print(f"model {model_dir} dtype {next(model.parameters()).dtype} threads {torch.get_num_threads()} "
              f"prompts {len(prompts)} x {n} max_tokens {args.max_tokens} temperature {args.temperature}")

        hf_backend = TransformersBackend(cfg, model, tok)
        eos = hf_backend.eos_ids

        def hf_generate() -> int:
            tok.padding_side = "left"
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                out = model.generate(input_ids=enc["input_ids"].repeat_interleave(n, 0),
                                     attention_mask=enc["attention_mask"].repeat_interleave(n, 0),
                                     do_sample=True, temperature=args.temperature, top_p=1.0, top_k=0,
                                     max_new_tokens=args.max_tokens, eos_token_id=eos,
                                     pad_token_id=tok.pad_token_id)
            mask, _ = completion_mask_from_eos(out[:, enc["input_ids"].size(1):], eos)
            return int(mask.sum())

        hf_rate, _ = timed("hf model.generate", hf_generate, args.repeats)
        ours_rate, _ = timed("ours (transformers)", lambda: hf_backend.generate(prompts, n).num_tokens, args.repeats)

        from grpo_core.generation.vllm.engine import VLLMBackend

        start = time.perf_counter()
        vllm_backend = VLLMBackend(cfg, model, tok)
        print(f"vllm engine start-up {time.perf_counter() - start:.1f} s")
        vllm_rate, _ = timed("ours (vllm)", lambda: vllm_backend.generate(prompts, n).num_tokens, args.repeats)
        start = time.perf_counter()
        vllm_backend.weights.reset()
        sent = vllm_backend.sync_weights()
        print(f"vllm full weight sync {sent} tensors {time.perf_counter() - start:.2f} s")
        server = ""
        if args.server_url:
            server_backend = VLLMBackend(run_config(model_dir, args, Path(tmp), args.server_url), model, tok)
            server_rate, _ = timed("ours (vllm server)", lambda: server_backend.generate(prompts, n).num_tokens,
                                   args.repeats)
            start = time.perf_counter()
            server_backend.weights.reset()
            sent = server_backend.sync_weights()
            print(f"vllm server full weight push {sent} tensors {time.perf_counter() - start:.2f} s")
            server = f" server_tokens_per_s={server_rate:.1f}"
    print(f"summary backend=vllm tokens_per_s={vllm_rate:.1f} hf_tokens_per_s={hf_rate:.1f} "
          f"ratio={vllm_rate / hf_rate:.2f} ours_hf_tokens_per_s={ours_rate:.1f}{server}")


if __name__ == "__main__":
    main()
