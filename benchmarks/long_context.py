"""The longest completion that trains under a fixed memory cap: ours vs TRL's path, in one run.

    python benchmarks/long_context.py [--cap-gib 4] [--start 1024] [--max-length 65536] [--hidden 64]

One training pass (forced completions: a 32-token prompt and a completion of the given length, random ids;
LoRA r=16 on the attention projections; gradient checkpointing; fp32) of a Qwen2-shaped model with the real
vocabulary (151,936 rows; random weights built from a config, a small hidden size so that it runs on a CPU),
at completion lengths doubling from ``--start`` until both sides fail or ``--max-length`` is reached.

``ours``: the backbone once, then the chunked head (``grpo_core.policy.logprobs.completion_logprobs``, no
``[K, V]`` logits). ``trl``: what ``trl.GRPOTrainer._get_per_token_logps_and_entropies`` runs in TRL 1.16, the
model patched with ``trl.trainer.utils.add_fused_lm_head`` (log-probs and entropy, as the trainer asks) and called
with ``labels`` and ``fused_lm_head=True``: TRL's own tiled head, no full logits either. ``trl_logits``
(``--sides``): TRL's path before the fused head (the logits of the last K + 1 positions, divided by the
temperature, then ``selective_log_softmax``). All take the same loss (``-(logp * advantage).mean()``) and backward.

Each side runs in its own process under the same cap, fixed before the run: a memory cgroup made for it
under this process's own (v2 ``memory.max``, or v1 ``memory.limit_in_bytes``, swap off where the kernel
allows), else ``RLIMIT_AS`` plus the process's reported peak (``VmHWM``); the first line says which. Per
length: each side's peak (the cgroup's maximum usage, or VmHWM), seconds per 1k completion tokens and
whether it fits (finished under the cap).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VOCAB = 151_936
SIDES = ("ours", "trl", "trl_logits")
PROMPT = 32


# ---------------------------------------------------------------- the cap
class Cap:
    """A memory cap for one child process: ``method`` says how it is enforced."""

    def __init__(self, cap_bytes: int):
        self.cap = cap_bytes
        self.method, self._base = self._find()

    @staticmethod
    def _own(controller: str) -> str | None:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (controller == "" and names == "") or controller in names.split(","):
                return path
        return None

    def _find(self) -> tuple[str, Path | None]:
        root = Path("/sys/fs/cgroup")
        candidates = []
        if "memory" in (root / "cgroup.controllers").read_text().split() if (root / "cgroup.controllers").exists() \
                else False:
            candidates.append(("cgroup v2", root / (self._own("") or "/").lstrip("/")))
        if (root / "memory" / "memory.limit_in_bytes").exists():
            candidates.append(("cgroup v1", root / "memory" / (self._own("memory") or "/").lstrip("/")))
        for method, base in candidates:
            probe = base / f"grpo_long_context_probe_{os.getpid()}"
            try:
                probe.mkdir()
                probe.rmdir()
                return method, base
            except OSError:
                continue
        return "RLIMIT_AS + VmHWM", None

    def start(self, name: str) -> Path | None:
        """A fresh cgroup capped at the limit (None under RLIMIT_AS)."""
        if self._base is None:
            return None
        group = self._base / f"grpo_long_context_{os.getpid()}_{name}"
        group.mkdir()
        if self.method == "cgroup v2":
            (group / "memory.max").write_text(str(self.cap))
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")
        else:
            (group / "memory.limit_in_bytes").write_text(str(self.cap))
            swap = group / "memory.memsw.limit_in_bytes"
            if swap.exists():
                with contextlib.suppress(OSError):  # not every kernel accounts swap
                    swap.write_text(str(self.cap))
        return group

    def preexec(self, group: Path | None) -> Any:
        def enter() -> None:
            if group is None:
                resource.setrlimit(resource.RLIMIT_AS, (self.cap, self.cap))
            else:
                (group / "cgroup.procs").write_text(str(os.getpid()))
        return enter

    def peak(self, group: Path | None) -> int | None:
        if group is None:
            return None
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            if (group / name).exists():
                return int((group / name).read_text().split()[0])
        return None

    def close(self, group: Path | None) -> None:
        if group is not None:
            for _ in range(50):
                try:
                    group.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


# ---------------------------------------------------------------- one pass, in the child
def build_model(out: Path, hidden: int, layers: int, positions: int) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=max(1, hidden // 32), num_key_value_heads=1,
                         max_position_embeddings=positions, tie_word_embeddings=True)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(out)


def vm_hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def one_pass(side: str, model_dir: str, length: int) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="sdpa")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    if side == "trl":  # TRL patches the base model (before or under PEFT) with its fused head
        from trl.trainer.utils import add_fused_lm_head

        add_fused_lm_head(model, temperature=1.0, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj",
                                                                                  "o_proj"]))
    model.train()
    ids = torch.randint(2, VOCAB, (1, PROMPT + length), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    t0 = time.perf_counter()
    if side == "ours":
        from grpo_core.policy.logprobs import completion_logprobs

        logps, _ = completion_logprobs(model, ids, mask, length)
    elif side == "trl":
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, : -(length + 1)] = -100  # only the completion is scored (logits_to_keep = K + 1)
        logps = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs[:, -length:]
    else:
        from trl.trainer.utils import selective_log_softmax

        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=length + 1).logits[:, :-1, :]
        logits = logits / 1.0  # the temperature, as TRL divides
        logps = selective_log_softmax(logits, ids[:, -length:])
    loss = -(logps * 0.5).mean()
    loss.backward()
    seconds = time.perf_counter() - t0
    if not any(p.grad is not None for p in model.parameters()):
        raise RuntimeError("no gradient reached the adapters")
    return {"seconds": seconds, "loss": float(loss), "vmhwm": vm_hwm()}


# ---------------------------------------------------------------- the driver
def run_side(cap: Cap, side: str, model_dir: Path, length: int, timeout: float) -> dict[str, Any]:
    group = cap.start(f"{side}_{length}")
    try:
        cmd = [sys.executable, __file__, "--child", side, "--model", str(model_dir), "--length", str(length)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=cap.preexec(group))
        except subprocess.TimeoutExpired:
            return {"fits": False, "why": f"over {timeout:g} s", "peak": cap.peak(group)}
        lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            killed = proc.returncode in (-9, 137)
            why = "killed at the cap (OOM)" if killed else ("MemoryError" if "MemoryError" in proc.stderr
                                                            or "alloc" in tail.lower() else tail[:80])
            return {"fits": False, "why": why, "peak": cap.peak(group)}
        out = json.loads(lines[-1])
        peak = cap.peak(group) or out["vmhwm"]
        return {"fits": True, "peak": peak, "seconds": out["seconds"], "loss": out["loss"]}
    finally:
        cap.close(group)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap-gib", type=float, default=4.0)
    ap.add_argument("--start", type=int, default=1024)
    ap.add_argument("--max-length", type=int, default=65536)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per pass before it counts as failed")
    ap.add_argument("--sides", default="ours,trl,trl_logits", help="ours, trl (TRL 1.16's fused head), trl_logits")
    ap.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--length", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--plot", default="", help="also draw peak memory against length to this PNG (matplotlib)")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_pass(args.child, args.model, args.length)), flush=True)
        return
    cap = Cap(int(args.cap_gib * 2**30))
    print(f"cap {args.cap_gib:g} GiB per side, enforced by {cap.method}; Qwen2-shaped, vocab {VOCAB}, hidden "
          f"{args.hidden}, {args.layers} layers, LoRA r=16, fp32; load {os.getloadavg()[0]:.2f} on "
          f"{len(os.sched_getaffinity(0))} cores", flush=True)
    sides = [s for s in args.sides.split(",") if s]
    if not sides or set(sides) - set(SIDES):
        ap.error(f"--sides: choose among {', '.join(SIDES)}")
    print(f"{'length':>7} | " + " | ".join(f"{s + ' peak':>14} {'s/1k tok':>9} {'fits':>5}" for s in sides), flush=True)
    longest = dict.fromkeys(sides, 0)
    points: dict[str, list[tuple[int, float, bool]]] = {side: [] for side in sides}  # (length, peak GiB, fits)
    with tempfile.TemporaryDirectory(prefix="long_context_") as tmp:
        model_dir = Path(tmp) / "model"
        build_model(model_dir, args.hidden, args.layers, PROMPT + args.max_length + 1)
        length = args.start
        alive = dict.fromkeys(sides, True)
        while length <= args.max_length and any(alive.values()):
            cells = []
            for side in sides:
                r = run_side(cap, side, model_dir, length, args.timeout) if alive[side] else \
                    {"fits": False, "why": "failed at a shorter length", "peak": None}
                alive[side] = r["fits"]
                if r.get("peak"):
                    points[side].append((length, r["peak"] / 2**30, r["fits"]))
                if r["fits"]:
                    longest[side] = length
                peak = f"{r['peak'] / 2**30:.2f} GiB" if r.get("peak") else "-"
                per_k = f"{r['seconds'] / (length / 1024):.2f}" if r["fits"] else "-"
                cells.append(f"{peak:>14} {per_k:>9} {'yes' if r['fits'] else 'no':>5}"
                             + ("" if r["fits"] else f" ({r['why']})"))
            print(f"{length:>7} | " + " | ".join(cells), flush=True)
            length *= 2
    parts = []
    for side, tokens in longest.items():
        ratio = "" if side == "ours" or "ours" not in longest else (
            f" (ours/{side} {longest['ours'] / tokens:.0f}x)" if tokens else " (fit no length)")
        parts.append(f"{side} {tokens}{ratio}")
    print(f"longest that trains under the cap: {', '.join(parts)}; lengths tried up to "
          f"{min(length // 2, args.max_length)}")
    if args.plot:
        plot(points, args.cap_gib, args.plot)


LABELS = {"ours": "ours (chunked LM head)", "trl": "TRL 1.16 (fused LM head)", "trl_logits": "TRL, full logits"}


def plot(points: dict[str, list[tuple[int, float, bool]]], cap_gib: float, path: str) -> None:
    """Peak memory against completion length per side, a cross where the side was killed at the cap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for side, pts in points.items():
        fits = [(n, gib) for n, gib, ok in pts if ok]
        line = ax.plot([n for n, _ in fits], [gib for _, gib in fits], marker="o", label=LABELS.get(side, side))[0]
        for n, _, ok in pts:
            if not ok:
                ax.plot([n], [cap_gib], marker="x", markersize=10, color=line.get_color())
    ax.axhline(cap_gib, color="grey", linestyle="--", linewidth=1, label=f"{cap_gib:g} GiB cap")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("completion tokens (one training pass, LoRA, real 151,936-token vocabulary)")
    ax.set_ylabel("peak memory (GiB)")
    ax.set_title("The longest completion that trains under a fixed memory cap")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
