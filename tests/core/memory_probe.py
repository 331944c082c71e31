"""One planned training step of a random model in a fresh process, printing its measured peak as JSON.

``python memory_probe.py '{"config": {...Qwen2Config kwargs}, "rows": 8, "prompt": 64, "completion": 256,
"dtype": "float32", "lora_rank": 0, "budget_gb": null}'``: plans the step on this CPU with
:func:`grpo_core.policy.step_plan.plan_step` (one group: ``rows`` completions of one prompt), builds the model,
applies the plan, and runs what the trainer's update runs (the planned passes of
:func:`grpo_core.policy.logprobs.completion_logprobs` with the plan's head chunk and prompt sharing, a backward
each, an AdamW step; twice, the second holding the optimizer's moments as every later step does). The peak is
Linux's VmHWM after the steps less the resident set before the model was built (the interpreter, torch and
transformers), so it counts what the steps allocate, as the estimate does. Run it with
``MALLOC_MMAP_THRESHOLD_=65536``: glibc then gives every large tensor its own mapping, returned when freed, so
the resident set follows the live tensors instead of keeping freed heap pages.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def main(spec: dict) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from grpo_core.policy.logprobs import completion_logprobs
    from grpo_core.policy.step_plan import BatchShape, DeviceInfo, PlanSettings, apply_step_plan, plan_step

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = Qwen2Config(**spec["config"], attn_implementation="sdpa")
    rows, prompt, completion = spec["rows"], spec["prompt"], spec["completion"]
    batch = BatchShape(rows=rows, step_rows=rows, prompt_length=prompt, completion_length=completion, group_size=rows)
    settings = PlanSettings(dtype=spec["dtype"], lora_rank=spec["lora_rank"], budget_gb=spec.get("budget_gb"),
                            explicit=spec.get("explicit", {}))
    plan = plan_step(DeviceInfo("cpu"), config, batch, settings)
    ids = torch.cat([torch.randint(0, config.vocab_size, (1, prompt)).expand(rows, prompt),
                     torch.randint(0, config.vocab_size, (rows, completion))], dim=1)
    mask = torch.ones_like(ids)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status("VmRSS:")
    model = Qwen2ForCausalLM(config).to(getattr(torch, spec["dtype"]))
    if spec["lora_rank"]:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=spec["lora_rank"], target_modules="all-linear"))
    model.train()
    if plan.gradient_checkpointing and spec["lora_rank"] == 0:
        model.config.use_cache = False
    apply_step_plan(model, plan)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    per_pass = rows if plan.micro_batch_tokens == 0 else max(1, plan.micro_batch_tokens // ids.shape[1])
    for _ in range(2):  # the second step holds AdamW's moments through its passes, as every later step does
        for part in torch.arange(rows).split(per_pass):
            logps, _ = completion_logprobs(model, ids[part], mask[part], completion,
                                           chunk_size=plan.logprob_chunk_size, share_prompts=plan.share_prompts)
            (-logps.mean() * len(part) / rows).backward()
        optimizer.step()
        optimizer.zero_grad()
    peak = _status("VmHWM:") - before
    est = plan.estimate
    return {"measured": peak, "estimated": est.peak, "resident": est.resident, "training": est.training,
            "generation": est.generation, "plan": plan.to_dict()}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
