"""The checks of ``scripts/gpu_check.sh``: what CPU CI cannot run, one check per call, one summary line.

    python scripts/gpu_check.py CHECK [--workdir DIR]      (CHECK: a name in CHECKS, or ``list``)

:data:`CHECKS` is the lane: the shell script runs the names ``list`` prints, and
``tests/core/test_gpu_check.py`` runs every trainer check's run config (:func:`run_config`) through the trainer
on the CPU, so a check whose config the trainer would refuse fails CI, not the GPU machine.

Each check prints exactly one line, ``PASS <check>: <what was measured>``, ``FAIL <check>: <why>`` or
``SKIP <check>: <why>`` (a missing package or no CUDA device), and exits 0 for PASS/SKIP, 1 for FAIL. Models
are random-weight Qwen2-shaped models built from a config (no network). A trainer check runs two steps of
``grpo_core.trainer.Trainer`` on a bf16 checkpoint with a reward whose values vary within a group
(:data:`REWARD`), and fails unless every step saw varying rewards, non-zero advantages and a non-zero gradient
(:func:`learning_signal`): a loss of 0 alone shows nothing, since GRPO's first-iteration loss is 0 by
construction. The log-prob checks compare the chunked head (``grpo_core.policy.logprobs.completion_logprobs``)
with TRL's full-logits path (``selective_log_softmax``, or the same formula written here when trl is not
installed: the line says which).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHARS = ["<pad>", "<eos>", *"0123456789+-=*/ ?.abcdefghijklmnopqrstuvwxyz"]
ROWS = [("what is 1+2?", "3"), ("add 3 and 4.", "7"), ("2*5=?", "10"), ("9-4=?", "5")]
# scores the last number of a completion by its distance to the answer: random characters hold digits, so the
# scores of a group differ (tolerance 10: a relative error of 10 earns half, so far numbers still differ)
REWARD = {"close": {"use": "numeric_proximity", "tolerance": 10.0}}
# the sections every trainer check starts from; a check's own sections are merged over them, key by key
BASE: dict[str, dict[str, Any]] = {
    "model": {"dtype": "auto", "gradient_checkpointing": True},
    "data": {"max_prompt_length": 32, "chat_template": False, "shuffle": False},  # a character tokenizer: no template
    "generation": {"num_generations": 8, "max_completion_length": 16},
    "grpo": {"learning_rate": 1e-3, "prompts_per_step": 2, "max_steps": 2, "seed": 0},
    "logging": {"progress": False, "plot": False},
    "checkpoint": {"every": 0, "every_minutes": 0},
    "rewards": REWARD,
}


class Skip(Exception):
    """The check cannot run here (the message says why)."""


@dataclass(frozen=True)
class Check:
    """One line of the lane. A trainer check has ``sections`` (its run config over :data:`BASE`) and a
    ``verify(trainer, last_metrics) -> str`` that checks what the setting should have done and says what it saw."""

    name: str
    what: str
    needs: tuple[str, ...] = ()
    sections: dict[str, dict[str, Any]] | None = None
    verify: Callable[[Any, dict[str, Any]], str] | None = None
    processes: int = 1  # > 1: that many ranks under torchrun (:func:`launch`), one device each on CUDA
    tokens: int = 0  # a log-prob check: completion tokens

    @property
    def trains(self) -> bool:
        return self.sections is not None


# why a package may be missing on the GPU machine (scripts/gpu_wheels.sh carries the others)
NOT_CARRIED = {"vllm": "its CUDA wheel is far over the 64 MiB scripts/gpu_wheels.sh carries: vLLM on CUDA is "
                       "unverified on this machine"}


def need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        why = "; ".join(NOT_CARRIED[m] for m in missing if m in NOT_CARRIED) or "bash scripts/gpu_wheels.sh carries it"
        raise Skip(f"{', '.join(missing)} not installed ({why})")


def build_model(out: Path, *, vocab: int | None = None, hidden: int = 64, layers: int = 2, positions: int = 512,
                dtype: str = "float32") -> Path:
    """A random Qwen2 saved in ``dtype`` with a character tokenizer (its vocabulary padded to ``vocab`` rows)."""
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
    Qwen2ForCausalLM(config).to(getattr(torch, dtype)).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def run_config(check: Check, work: Path) -> dict[str, Any]:
    """The run config ``check`` trains with (plain data, as a TOML file would give it), its bf16 model and rows
    written under ``work``."""
    assert check.sections is not None, f"{check.name} is not a trainer check"
    model = build_model(work / "model", dtype="bfloat16")
    rows = work / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": p, "answer": a}) + "\n" for p, a in ROWS))
    config = copy.deepcopy(BASE)
    config["model"]["name_or_path"] = str(model)
    config["data"]["source"] = str(rows)
    config["logging"]["output_dir"] = str(work / "run")
    for name, values in copy.deepcopy(check.sections).items():
        merged = {**config.get(name, {}), **values}
        config[name] = {k: v for k, v in merged.items() if v is not None}  # None: the key left to the planner
    return config


def learning_signal(steps: list[dict[str, Any]]) -> str:
    """Raise unless every step's rewards varied, its advantages were non-zero and its gradient non-zero and
    finite; a summary of what was seen."""
    for m in steps:
        seen = {k: m.get(k) for k in ("reward/std", "advantages/abs_max", "grad_norm", "loss")}
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in seen.values()):
            raise AssertionError(f"step {m.get('step')}: a missing or non-finite metric in {seen}")
        if not (seen["reward/std"] > 0 and seen["advantages/abs_max"] > 0 and seen["grad_norm"] > 0):
            raise AssertionError(f"step {m.get('step')} learned nothing: {seen}")
    return ("rewards varied (std " + "/".join(f"{m['reward/std']:.3g}" for m in steps) + "), |advantage| max "
            + "/".join(f"{m['advantages/abs_max']:.3g}" for m in steps) + ", grad norm "
            + "/".join(f"{m['grad_norm']:.3g}" for m in steps))


def train(config: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """The project's trainer on ``config`` in this process (one rank of torchrun's world when it set one up);
    the trainer and each step's metrics, checked by :func:`learning_signal`."""
    from grpo_core.trainer import Trainer

    trainer = Trainer(config)
    trainer.train()
    lines = [json.loads(x) for x in (Path(config["logging"]["output_dir"]) / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in lines if "loss" in m]
    if len(steps) != config["grpo"]["max_steps"]:
        raise AssertionError(f"expected {config['grpo']['max_steps']} steps, got {steps}")
    learning_signal(steps)
    return trainer, steps


# ------------------------------------------------------------------------------------ what each check saw ---


def _base(model: Any) -> Any:
    from grpo_core.policy.models import is_peft

    return model.get_base_model() if is_peft(model) else model


def verify_autocast(trainer: Any, m: dict[str, Any]) -> str:
    """A full fine-tune of a bf16 checkpoint: fp32 master weights, forwards under bf16 autocast on CUDA."""
    import torch

    from grpo_core.policy.models import compute_dtype

    model = trainer.model
    dtypes = {p.dtype for p in model.parameters() if p.requires_grad}
    if dtypes != {torch.float32}:
        raise AssertionError(f"trained weights are {dtypes}, not fp32 master weights")
    marked = getattr(_base(model), "_grpo_autocast_dtype", None)
    if marked != torch.bfloat16:
        raise AssertionError(f"the bf16 checkpoint was not marked for bf16 autocast ({marked})")
    where = next(model.parameters()).device
    if where.type == "cuda" and compute_dtype(model) != torch.bfloat16:
        raise AssertionError(f"forwards on {where} run in {compute_dtype(model)}, not under bf16 autocast")
    return f"fp32 master weights, bf16 autocast on {where}"


def verify_bf16_lora(trainer: Any, m: dict[str, Any]) -> str:
    """LoRA on a bf16 base: the base stays bf16 and frozen, the adapters train in fp32."""
    import torch

    trained = [(n, p.dtype) for n, p in trainer.model.named_parameters() if p.requires_grad]
    frozen = {p.dtype for p in trainer.model.parameters() if not p.requires_grad}
    if not trained or any("lora_" not in n or d != torch.float32 for n, d in trained):
        raise AssertionError(f"expected fp32 LoRA weights only to train, got {trained[:4]}")
    if frozen != {torch.bfloat16}:
        raise AssertionError(f"the frozen base is {frozen}, not bf16")
    return f"bf16 base, {len(trained)} fp32 LoRA tensors trained"


def verify_qlora(trainer: Any, m: dict[str, Any]) -> str:
    four_bit = [n for n, mod in trainer.model.named_modules() if type(mod).__name__ == "Linear4bit"]
    if not four_bit:
        raise AssertionError("no bitsandbytes Linear4bit layer in the model")
    return f"{len(four_bit)} nf4 layers under LoRA"


def verify_vllm(trainer: Any, m: dict[str, Any]) -> str:
    k3 = m.get("rollout_corr/k3_kl")
    if k3 is None:
        raise AssertionError("no rollout_corr/k3_kl in the step metrics: the correction did not run")
    return f"the colocated engine slept between rollouts, k3 KL {k3:.3g}"


def verify_engine(name: str) -> Callable[[Any, dict[str, Any]], str]:
    def verify(trainer: Any, m: dict[str, Any]) -> str:
        got = type(trainer.engine).__name__
        if name not in got:
            raise AssertionError(f"the update ran through {got}, not {name}")
        return f"{got}; " + verify_autocast(trainer, m)

    return verify


def verify_plan(trainer: Any, m: dict[str, Any]) -> str:
    """The step planner on this device within ``[trainer] memory_budget_gb``: the chosen step's estimate fits the
    budget; on CUDA the measured peak fits it too, the plan is the CUDA one (the memory allows the update
    without recomputing the layers, so it does not checkpoint) and the group sampler decodes through CUDA graphs."""
    import torch

    plan, gib = trainer.step_plan, float(2**30)
    if plan.budget_bytes is None or plan.budget_source == "none":
        raise AssertionError(f"the plan has no budget ({plan.budget_source})")
    if plan.estimate.peak > plan.budget_bytes:
        raise AssertionError(f"the chosen step's estimate {plan.estimate.peak / gib:.3f} GiB is over its budget")
    chosen = (f"micro_batch_tokens {plan.micro_batch_tokens}, checkpointing {plan.gradient_checkpointing}, "
              f"head tiles {plan.logprob_chunk_size}")
    where = trainer.device
    if where.type != "cuda":
        return f"plan on {where.type} within {plan.budget_bytes / gib:.2f} GiB: {chosen}"
    peak = torch.cuda.max_memory_allocated(where)
    if peak > plan.budget_bytes:
        raise AssertionError(f"measured peak {peak / gib:.3f} GiB over the {plan.budget_bytes / gib:.2f} GiB budget")
    if plan.gradient_checkpointing:
        raise AssertionError(f"the CUDA plan checkpoints a model whose update fits without it ({plan.reasons})")
    decode = getattr(trainer.backend, "decode", None)
    if decode != "cuda_graph":
        raise AssertionError(f"the group sampler decoded with {decode!r} on CUDA, not through CUDA graphs")
    return (f"measured peak {peak / gib:.3f} GiB, estimated {plan.estimate.peak / gib:.3f} GiB, budget "
            f"{plan.budget_bytes / gib:.2f} GiB; {chosen}; decode {decode}")


def verify_shared_prompts(trainer: Any, m: dict[str, Any]) -> str:
    """The planner shares prompts through FlexAttention block masks on CUDA (the dense mask on a CPU), the load
    check kept the packing, and on 2 groups x 8 completions behind prompts of different lengths (left-padded) a
    packed forward and backward gives the unpacked log-probs and gradients; each side's peak and time printed."""
    import time

    import torch

    from grpo_core.generation.transformers_backend import sampling_autocast
    from grpo_core.policy.logprobs import completion_logprobs
    from grpo_core.policy.packed_attention import packing_kernel
    from grpo_core.policy.shared_prompts import packable, plan

    plan_, model, where = trainer.step_plan, trainer.model, trainer.device
    want = "flex_attention" if where.type == "cuda" else "dense_mask"
    if not plan_.share_prompts or plan_.packing_kernel != want:
        raise AssertionError(f"the plan shares prompts {plan_.share_prompts} through {plan_.packing_kernel}, "
                             f"not {want} ({plan_.reasons.get('grpo.share_prompts')})")
    k, prompts = (384, (96, 64)) if where.type == "cuda" else (24, (12, 8))
    if packing_kernel(model) != want or not packable(model, prompts[0] + k):
        raise AssertionError(f"the model packs through {packing_kernel(model)} (packable: "
                             f"{packable(model, prompts[0] + k)}): the load check turned packing off")
    g = torch.Generator().manual_seed(0)
    vocab = int(model.get_input_embeddings().weight.shape[0])
    ids = torch.randint(2, vocab, (16, prompts[0] + k), generator=g)
    mask = torch.ones_like(ids)
    for i, length in enumerate(prompts):
        ids[i * 8:(i + 1) * 8, :prompts[0]] = ids[i * 8, :prompts[0]]
        mask[i * 8:(i + 1) * 8, :prompts[0] - length] = 0
    mask[3, -5:] = 0
    ids, mask = ids.to(where), mask.to(where)
    if plan(model, ids, mask, k, per_row=8) is None:
        raise AssertionError("the batch was not packed")
    params = [p for p in model.parameters() if p.requires_grad]
    seen = {}
    for share in (False, True, False, True):  # the second of each measured (the first compiles flex on CUDA)
        model.zero_grad(set_to_none=True)
        if where.type == "cuda":
            torch.cuda.synchronize(where)
            torch.cuda.reset_peak_memory_stats(where)
        start = time.perf_counter()
        with sampling_autocast(model):  # as the trainer's passes run
            logps, _ = completion_logprobs(model, ids, mask, k, share_prompts=share,
                                           completions_per_row=8 if share else None)
        logps[mask[:, -k:].bool()].float().sum().backward()
        if where.type == "cuda":
            torch.cuda.synchronize(where)
        peak = torch.cuda.max_memory_allocated(where) / 2**30 if where.type == "cuda" else float("nan")
        grad = torch.cat([p.grad.float().flatten() for p in params if p.grad is not None])
        seen[share] = (logps.detach().float(), grad, peak, time.perf_counter() - start)
    model.zero_grad(set_to_none=True)
    real = mask[:, -k:].bool()
    gap = (seen[True][0] - seen[False][0])[real].abs().max().item()
    cosine = torch.nn.functional.cosine_similarity(seen[True][1], seen[False][1], dim=0).item()
    if not (gap < 0.05 and cosine > 0.99):
        raise AssertionError(f"packed against unpacked: max |log-prob gap| {gap:.3g}, gradient cosine {cosine:.4f}")
    def cost(share: bool) -> str:
        peak = "" if where.type != "cuda" else f"peak {seen[share][2]:.3f} GiB, "
        return f"{peak}{seen[share][3] * 1e3:.0f} ms"

    return (f"packed through {want}: 16 x {k} tokens behind prompts of {prompts}: max |gap| {gap:.2e}, gradient "
            f"cosine {cosine:.5f}; forward+backward {cost(True)} packed vs {cost(False)} unpacked")


CHECKS: tuple[Check, ...] = (
    Check("bf16_autocast", "a full fine-tune of a bf16 checkpoint: fp32 master weights, bf16 autocast",
          sections={}, verify=verify_autocast),
    Check("bf16_lora", "LoRA r=16 on a bf16 base (dtype = \"bfloat16\")", needs=("peft",),
          sections={"model": {"dtype": "bfloat16"}, "lora": {"enabled": True}}, verify=verify_bf16_lora),
    Check("qlora", "QLoRA: a 4-bit nf4 base through bitsandbytes, LoRA on it", needs=("bitsandbytes", "peft"),
          sections={"lora": {"enabled": True}, "quantization": {"load_in_4bit": True, "quant_type": "nf4"}},
          verify=verify_qlora),
    Check("vllm_colocate_sleep", "vLLM colocated with sleep mode, its sampling log-probs corrected for",
          needs=("vllm",), verify=verify_vllm,
          sections={"generation": {"backend": "vllm", "vllm_mode": "colocate", "vllm_sleep_level": 1,
                                   "vllm_gpu_memory_utilization": 0.2}}),
    Check("planned_step", "the step planner within a 2 GiB budget, decode through CUDA graphs",
          sections={"model": {"gradient_checkpointing": None}, "trainer": {"memory_budget_gb": 2.0}},
          verify=verify_plan),
    Check("shared_prompts_flex", "each group's prompt shared through FlexAttention block masks by the planner",
          sections={}, verify=verify_shared_prompts),
    Check("logprobs_4096", "the chunked log-prob head against TRL's at 4,096 tokens", tokens=4096),
    Check("logprobs_16384", "the chunked log-prob head against TRL's at 16,384 tokens", tokens=16384),
    Check("deepspeed_zero2", "DeepSpeed ZeRO-2 in one process, bf16 autocast", needs=("deepspeed",),
          sections={"distributed": {"engine": "deepspeed", "zero_stage": 2}}, verify=verify_engine("DeepSpeed")),
    # two ranks: a run of one process gives way to the plain engine (grpo_core.parallel.engine.engine_class), and
    # NCCL runs one rank per device, so FSDP2 needs two GPUs (on the CPU, two gloo processes)
    Check("fsdp2", "FSDP2 over two ranks, bf16 autocast", processes=2,
          sections={"distributed": {"engine": "fsdp2"}}, verify=verify_engine("FSDP2")),
)
NAMES = tuple(c.name for c in CHECKS)
BY_NAME = {c.name: c for c in CHECKS}


# ------------------------------------------------------------------------------------------- log-probs ---


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
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda().eval()
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


# ------------------------------------------------------------------------------------------------- main ---


def trained(check: Check, config: dict[str, Any]) -> str:
    """``config`` trained for ``check`` in this process; what :attr:`Check.verify` and :func:`learning_signal` saw."""
    assert check.verify is not None
    trainer, steps = train(config)
    return f"{len(steps)} steps: {check.verify(trainer, steps[-1])}; {learning_signal(steps)}"


def launch(check: Check, config: dict[str, Any], work: Path, timeout: float = 600) -> str:
    """``config`` trained for ``check`` by :attr:`Check.processes` ranks under torchrun (this script's ``--worker``
    mode on each); rank 0's summary."""
    path = work / "config.json"
    path.write_text(json.dumps(config))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={check.processes}",
           str(Path(__file__).resolve()), check.name, "--worker", str(path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    result = path.with_suffix(".result")
    if proc.returncode or not result.is_file():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        lines = [ln for ln in proc.stderr.splitlines() if "Error" in ln] or ["no summary"]
        raise AssertionError(f"{check.processes} ranks exited {proc.returncode}: {lines[-1].strip()[:200]}")
    return result.read_text()


def worker(check: Check, config_path: Path) -> int:
    """One rank of :func:`launch`: trains the config, rank 0 writes the summary beside it."""
    summary = trained(check, json.loads(config_path.read_text()))
    if os.environ.get("RANK", "0") == "0":
        config_path.with_suffix(".result").write_text(summary)
    return 0


def run_check(check: Check, work: Path) -> str:
    """The check on this machine's GPU; its summary (raises on failure, :class:`Skip` when it cannot run)."""
    import torch

    need(*check.needs)
    if not check.trains:
        return check_logprobs(work, check.tokens)
    if torch.cuda.device_count() < check.processes:
        raise Skip(f"needs {check.processes} CUDA devices, one per rank (this machine has "
                   f"{torch.cuda.device_count()})")
    config = run_config(check, work)
    return trained(check, config) if check.processes == 1 else launch(check, config, work)


def run(check: str, work: Path) -> tuple[str, str]:
    import torch

    if not torch.cuda.is_available():
        return "SKIP", "torch sees no CUDA device"
    try:
        return "PASS", run_check(BY_NAME[check], work)
    except Skip as why:
        return "SKIP", str(why)
    except Exception as exc:  # the summary line says what failed; the traceback goes to stderr
        traceback.print_exc()
        return "FAIL", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="One GPU check, one summary line.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="checks:\n" + "\n".join(f"  {c.name:<20} {c.what}" for c in CHECKS))
    ap.add_argument("check", choices=[*NAMES, "list"])
    ap.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)  # a rank of launch(): its config
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.check == "list":
        print(" ".join(NAMES))
        return 0
    sys.path.insert(0, str(REPO))
    if args.worker:
        return worker(BY_NAME[args.check], args.worker)
    with tempfile.TemporaryDirectory(prefix=f"gpu_check_{args.check}_", dir=args.workdir) as tmp:
        status, what = run(args.check, Path(tmp))
    print(f"{status} {args.check}: {what}", flush=True)
    return 1 if status == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())
