# %% [markdown]
# # GRPO from Python, in TRL's shape
#
# Objects in: a `PeftModel`, its tokenizer, a `datasets.Dataset`, a plain reward function and a registry
# reward, mixed in one list with weights. Runs on a CPU in well under a minute (a tiny Llama built on the
# spot, nothing downloaded). Open it as a notebook with jupytext, or run `python examples/python_api.py`.

# %%
import json
import sys
import tempfile
from pathlib import Path

import datasets
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_core import GRPOTrainer
from grpo_core.demo.task import completion, make_split
from grpo_core.demo.tiny import TinySpec, build_tiny_model

workdir = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="grpo_python_api_"))

# %% [markdown]
# A model and a tokenizer as a notebook holds them: here a tiny Llama saved and loaded back, wrapped in LoRA.

# %%
rows = make_split("train", max_operand=9, size=64)  # {"prompt": "3+4=", "answer": "7", ...}
build_tiny_model(workdir / "tiny", [r["prompt"] + completion(r) for r in rows], TinySpec(hidden=32, intermediate=64))
tokenizer = AutoTokenizer.from_pretrained(workdir / "tiny")
model = get_peft_model(AutoModelForCausalLM.from_pretrained(workdir / "tiny", dtype="float32"),
                       LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
train_dataset = datasets.Dataset.from_list(rows)


# %% [markdown]
# Rewards: a plain function with TRL's signature (prompts, completions and every dataset column come by
# keyword) next to a reward from the registry (`grpo rewards list`).

# %%
def answer_in_tags(prompts, completions, answer, **kwargs):
    return [1.0 if f"<answer>{a}</answer>" in c else 0.0 for c, a in zip(completions, answer)]


trainer = GRPOTrainer(
    model=model,
    processing_class=tokenizer,
    reward_funcs=[answer_in_tags, "xml_count"],
    reward_weights=[1.0, 0.5],
    train_dataset=train_dataset,
    args={"data": {"chat_template": False, "max_prompt_length": 16},
          "generation": {"num_generations": 4, "max_completion_length": 12},
          "grpo": {"learning_rate": 1e-2, "prompts_per_step": 4, "max_steps": 4},
          "logging": {"output_dir": str(workdir / "run"), "progress": False, "plot": False}},
)
result = trainer.train()

# %% [markdown]
# Results out: the run folder holds `metrics.jsonl`, `samples.jsonl` and the adapter in `model/`.

# %%
summary = {"steps": result.global_step, "reward_mean": result["reward/mean"],  # a TrainOutput; by name: the run
           "rewards": {k: v for k, v in result.summary.items() if k.startswith("rewards/") and k.count("/") == 1},
           "adapter": str(workdir / "run" / "model")}
print(json.dumps(summary))
