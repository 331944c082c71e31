"""The checks of ``scripts/gpu_check.sh``: what CPU CI cannot run, one check per call, one summary line.

    python scripts/gpu_check.py CHECK [--workdir DIR]      (CHECK: one of CHECKS, or ``list``)

Each check prints exactly one line, ``PASS <check>: <what was measured>``, ``FAIL <check>: <why>`` or
``SKIP <check>: <why>`` (a missing package or no CUDA device), and exits 0 for PASS/SKIP, 1 for FAIL. Models
are random-weight Qwen2-shaped models built from a config (no network); the trainer checks run two steps of
``grpo_core.trainer.Trainer`` on the GPU; the log-prob checks compare the chunked head
(``grpo_core.policy.logprobs.completion_logprobs``) with TRL's full-logits path (``selective_log_softmax``,
or the same formula written here when trl is not installed: the line says which).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHECKS = ("bf16_autocast", "qlora", "vllm_colocate_sleep", "logprobs_4096", "logprobs_16384", "deepspeed_zero2",
          "fsdp2")
CHARS = ["<pad>", "<eos>", *"0123456789+-=*/ ?.abcdefghijklmnopqrstuvwxyz"]


class Skip(Exception):
    """The check cannot run here (the message says why)."""


def need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise Skip(f"{', '.join(missing)} not installed (no wheel beside the script either)")


def build_model(out: Path, *, vocab: int | None = None, hidden: int = 64, layers: int = 2, positions: int = 512) -> Path:
    """A random Qwen2 with a character tokenizer (its vocabulary padded to ``vocab`` rows when given)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tk = Tokenizer(models.WordLevel({c: i for i, c in enumerate(CHARS)}, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")
    config = Qwen2Config(vocab_size=vocab or len(CHARS), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=positions, pad_token_id=0, eos_token_id=1, bos_token_id=1,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def train_two_steps(work: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """Two optimizer steps of the project's trainer on a tiny model; the last step's metrics."""
    from grpo_core.trainer import Trainer

    model = build_model(work / "model")
    data = work / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ["what is 1+2?", "add 3 and 4.", "2*5=?"] * 2))
    config: dict[str, Any] = {
        "model": {"name_or_path": str(model), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": str(data), "max_prompt_length": 32},
        "generation": {"num_generations": 4, "max_completion_length": 16},
        "grpo": {"learning_rate": 1e-3, "prompts_per_step": 2, "max_steps": 2, "seed": 0},
        "logging": {"output_dir": str(work / "run"), "progress": False, "plot": False},
        "rewards": {"fmt": {"use": "xml_count"}},
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    Trainer(config).train()
    lines = [json.loads(x) for x in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in lines if "loss" in m]
    if len(steps) != 2 or not all(math.isfinite(m["loss"]) for m in steps):
        raise AssertionError(f"expected 2 steps with a finite loss, got {steps}")
    return steps[-1]


def check_bf16_autocast(work: Path) -> str:
    import torch

    m = train_two_steps(work, model={"dtype": "bfloat16"})
    return f"2 steps in bfloat16 on {torch.cuda.get_device_name()}, loss {m['loss']:.4g}"


def check_qlora(work: Path) -> str:
    need("bitsandbytes", "peft")
    m = train_two_steps(work, lora={"enabled": True}, quantization={"load_in_4bit": True, "quant_type": "nf4"})
    return f"2 steps with a 4-bit nf4 base and LoRA, loss {m['loss']:.4g}"


def check_vllm_colocate_sleep(work: Path) -> str:
    need("vllm")
    m = train_two_steps(work, generation={"backend": "vllm", "vllm_mode": "colocate", "vllm_sleep_level": 1,
                                          "vllm_gpu_memory_utilization": 0.2})
    k3 = m.get("rollout_corr/k3_kl")
    if k3 is None:
        raise AssertionError("no rollout_corr/k3_kl in the step metrics: the correction did not run")
    return f"2 steps, colocated engine sleeping between rollouts, k3 KL {k3:.3g}"


def trl_logps(model: Any, ids: Any, mask: Any, k: int) -> tuple[Any, str]:
    """TRL's path: the full ``[B, K, V]`` logits of the last ``k + 1`` positions, then its log-softmax gather."""
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=k + 1).logits[:, :-1, :]
    try:
        from trl.trainer.utils import selective_log_softmax

        return selective_log_softmax(logits, ids[:, -k:]), "trl.selective_log_softmax"
    except ImportError:
        import torch

        lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, -k:, None]).squeeze(-1)
        return lp, "the same formula (trl not installed)"


def check_logprobs(work: Path, tokens: int) -> str:
    import torch
    from transformers import AutoModelForCausalLM

    from grpo_core.policy.logprobs import completion_logprobs

    path = build_model(work / "model", vocab=151_936, hidden=256, positions=tokens + 64)
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16).cuda().eval()
    prompt = 32
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 151_936, (1, prompt + tokens), generator=g).cuda()
    mask = torch.ones_like(ids)
    peaks = {}
    with torch.no_grad():
        torch.cuda.reset_peak_memory_stats()
        ours, _ = completion_logprobs(model, ids, mask, tokens)
        peaks["ours"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()
        theirs, how = trl_logps(model, ids, mask, tokens)
        peaks["trl"] = torch.cuda.max_memory_allocated() / 2**30
    gap = (ours.float() - theirs.float()).abs().max().item()
    if not gap < 0.05:  # bf16 logits on both sides
        raise AssertionError(f"max |log-prob gap| {gap:.3g} against {how}")
    return (f"{tokens} tokens, vocab 151936, bf16: max |gap| {gap:.2e} against {how}; peak "
            f"{peaks['ours']:.2f} GiB ours vs {peaks['trl']:.2f} GiB TRL's path")


def check_deepspeed_zero2(work: Path) -> str:
    need("deepspeed")
    m = train_two_steps(work, model={"dtype": "bfloat16"}, distributed={"engine": "deepspeed", "zero_stage": 2})
    return f"2 steps through DeepSpeed ZeRO-2 in one process, loss {m['loss']:.4g}"


def check_fsdp2(work: Path) -> str:
    """FSDP2 needs a process group: one rank, started here (``grpo train --nproc 1`` does the same)."""
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("GPU_CHECK_PORT", "29531"), RANK="0",
                      WORLD_SIZE="1", LOCAL_RANK="0")
    try:
        m = train_two_steps(work, model={"dtype": "bfloat16"}, distributed={"engine": "fsdp2"})
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return f"2 steps through FSDP2 on one rank, loss {m['loss']:.4g}"


def run(check: str, work: Path) -> tuple[str, str]:
    import torch

    if not torch.cuda.is_available():
        return "SKIP", "torch sees no CUDA device"
    table = {"bf16_autocast": check_bf16_autocast, "qlora": check_qlora,
             "vllm_colocate_sleep": check_vllm_colocate_sleep, "deepspeed_zero2": check_deepspeed_zero2,
             "fsdp2": check_fsdp2, "logprobs_4096": lambda w: check_logprobs(w, 4096),
             "logprobs_16384": lambda w: check_logprobs(w, 16384)}
    try:
        return "PASS", table[check](work)
    except Skip as why:
        return "SKIP", str(why)
    except Exception as exc:  # the summary line says what failed; the traceback goes to stderr
        traceback.print_exc()
        return "FAIL", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="One GPU check, one summary line.")
    ap.add_argument("check", choices=[*CHECKS, "list"])
    ap.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: a temporary one)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.check == "list":
        print(" ".join(CHECKS))
        return 0
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix=f"gpu_check_{args.check}_", dir=args.workdir) as tmp:
        status, what = run(args.check, Path(tmp))
    print(f"{status} {args.check}: {what}", flush=True)
    return 1 if status == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())
