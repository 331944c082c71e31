"""examples/python_api.py (the Python API notebook) runs as a script on the CPU and trains its PeftModel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("datasets")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python_api.py"


def test_python_api_example_runs(tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 4
    assert set(summary["rewards"]) == {"rewards/answer_in_tags", "rewards/xml_count"}
    assert (Path(summary["adapter"]) / "adapter_config.json").is_file()
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 4


README = Path(__file__).resolve().parents[2] / "README.md"
# TRL's own quickstart, README.md of huggingface/trl at f2cd57710ae345ea6428ae95363267fcf38a3dc8 ("### `GRPOTrainer`")
TRL_QUICKSTART = '''from datasets import load_dataset
from trl import GRPOTrainer
from trl.rewards import accuracy_reward

dataset = load_dataset("trl-lib/DeepMath-103K", split="train")

trainer = GRPOTrainer(
    model="Qwen/Qwen2.5-0.5B-Instruct",
    reward_funcs=accuracy_reward,
    train_dataset=dataset,
)
trainer.train()
'''
# what runs the README's block offline: load_dataset answers with DeepMath-103K's shape (a conversational prompt,
# a LaTeX solution), and "Qwen/Qwen2.5-0.5B-Instruct" is a folder of that name in the working directory
RUNNER = '''
import sys, datasets
rows = [{"prompt": [{"role": "user", "content": "What is 1+1? Put the answer in \\\\boxed{}."}], "solution": "2"},
        {"prompt": [{"role": "user", "content": "What is 2+2? Put the answer in \\\\boxed{}."}], "solution": "4"}]
datasets.load_dataset = lambda *a, **k: datasets.Dataset.from_list(rows)
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"))
print("STEPS", trainer.state.global_step, trainer.state.log_history[-1]["train_loss"])
'''


def test_readme_python_example_is_trls_quickstart_and_runs(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    pytest.importorskip("math_verify")
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.core.conftest import build_tokenizer

    text = README.read_text()
    block = text[text.index("```python\n") + len("```python\n"):]
    block = block[: block.index("```")]
    assert block.replace("from grpo_core import GRPOTrainer", "from trl import GRPOTrainer") == TRL_QUICKSTART
    tok, out = build_tokenizer(), tmp_path / "Qwen" / "Qwen2.5-0.5B-Instruct"  # room for TRL's 512 new tokens
    import torch

    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=1024, mlp_bias=True, pad_token_id=tok.pad_token_id,
                                         eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id))
    with torch.no_grad():  # a stand-in that mostly ends at once: TRL's 512-token default costs no CPU time here
        direction = torch.ones(32)
        model.model.layers[-1].mlp.down_proj.bias.copy_(100 * direction)
        model.lm_head.weight[tok.eos_token_id] = 3 * direction
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (tmp_path / "quickstart.py").write_text(block)
    (tmp_path / "runner.py").write_text(RUNNER)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "runner.py", "quickstart.py"], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = done.stdout.strip().splitlines()[-1].split()
    assert steps[0] == "STEPS" and int(steps[1]) == 6  # TRL's defaults: 3 epochs of 2 prompts, 1 prompt x 8 a step
    assert (tmp_path / "Qwen2.5-0.5B-Instruct-GRPO" / "metrics.jsonl").is_file()  # TRL's default output_dir
    assert "GRPOTrainer:" in done.stderr and "done at step 6" in done.stderr
