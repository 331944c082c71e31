"""``grpo eval`` end to end on a tiny saved checkpoint: the JSONL of every sample, the summary recomputed
from it (means, pass@k), an adapter evaluated as its merged model, and bad input refused in one line with
exit 2 before anything is written."""

from __future__ import annotations

import itertools
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from grpo_rewards.command_line import main  # noqa: E402
from tests.core.conftest import arithmetic_rows  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, arithmetic_model_dir):
    """A saved tiny model, 6 rows of addition, a rewards file with a binary and a graded reward."""
    tmp = tmp_path_factory.mktemp("eval")
    rows = arithmetic_rows(40)
    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": r["prompt"], "answer": r["answer"]}) + "\n" for r in rows[:6]))
    rewards = tmp / "rewards.toml"
    rewards.write_text('[rewards.digit]\nuse = "core_match"\n[rewards.short]\nuse = "core_len"\n')
    return tmp, arithmetic_model_dir, data, rewards


def _run(*argv):
    return main(["eval", *map(str, argv)])


def _common(data, rewards):
    return ["--data", data, "--rewards", rewards, "--no-chat-template", "--max-new-tokens", "6"]


def brute_pass_at_k(n, c, k):
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


def test_eval_writes_every_sample_and_a_summary_that_matches_them(tiny, tmp_path, capsys, use_core_registry):
    _, model_dir, data, rewards = tiny
    out, summary_file = tmp_path / "samples.jsonl", tmp_path / "summary.json"
    rc = _run(model_dir, *_common(data, rewards), "--samples", 4, "--k", 1, "--k", 3, "--out", out,
              "--summary", summary_file, "--temperature", 1.5)
    assert rc == 0, capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 24 and sorted({r["prompt_index"] for r in records}) == list(range(6))
    assert {"prompt", "completion", "answer", "digit", "short", "total", "completion_tokens"} <= set(records[0])
    summary = json.loads(summary_file.read_text())
    assert summary["prompts"] == 6 and summary["samples_per_prompt"] == 4
    # recomputed from the JSONL: the mean of each prompt's mean, pass@k by enumeration
    for alias in ("digit", "short", "total"):
        per_prompt = [sum(r[alias] for r in records if r["prompt_index"] == i) / 4 for i in range(6)]
        entry = summary["rewards"][alias]
        assert entry["mean"] == pytest.approx(sum(per_prompt) / 6)
        assert entry["ci95"][0] <= entry["mean"] <= entry["ci95"][1]
    correct = [sum(r["digit"] > 0 for r in records if r["prompt_index"] == i) for i in range(6)]
    for k in (1, 3):
        assert summary["rewards"]["digit"]["pass@k"][str(k)] == pytest.approx(
            sum(brute_pass_at_k(4, c, k) for c in correct) / 6)
    assert "pass@k" not in summary["rewards"]["short"]  # graded, not pass/fail
    assert "pass@3" in capsys.readouterr().out

    before = out.read_bytes()
    assert _run(model_dir, *_common(data, rewards), "--out", out) == 2  # an existing output is refused
    err = capsys.readouterr().err.strip()
    assert err == f"--out: {out} exists; pass --overwrite to replace it" and out.read_bytes() == before
    assert _run(model_dir, *_common(data, rewards), "--out", out, "--overwrite") == 0
    assert len(out.read_text().splitlines()) == 6  # one greedy sample per prompt


def test_an_adapter_evaluates_as_its_merged_model(tiny, tmp_path, capsys, use_core_registry):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, model_dir, data, rewards = tiny
    torch.manual_seed(1)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                                LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # an adapter that changes the model
    checkpoint = tmp_path / "checkpoints" / "step_3"
    peft_model.save_pretrained(checkpoint / "adapter")  # the layout of a LoRA training checkpoint
    merged = tmp_path / "merged"
    peft_model.merge_and_unload().save_pretrained(merged)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(merged)

    texts = {}
    for name, model in (("adapter", checkpoint / "adapter"), ("checkpoint", checkpoint), ("merged", merged),
                        ("base", model_dir)):
        out = tmp_path / f"{name}.jsonl"
        assert _run(model, *_common(data, rewards), "--out", out) == 0, capsys.readouterr().err
        texts[name] = [json.loads(line)["completion"] for line in out.read_text().splitlines()]
    assert texts["adapter"] == texts["checkpoint"] == texts["merged"]
    assert texts["adapter"] != texts["base"]


def test_bad_input_is_one_line_exit_2_and_writes_nothing(tiny, tmp_path, capsys, use_core_registry):
    tmp, model_dir, data, rewards = tiny
    bad_rewards = tmp_path / "bad.toml"
    bad_rewards.write_text('[rewards.x]\nuse = "no_such_reward"\n')
    no_prompt = tmp_path / "q.jsonl"
    no_prompt.write_text('{"question": "1+1="}\n')
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out.jsonl"
    cases = [
        ([model_dir, *_common(tmp_path / "nope.jsonl", rewards)], "data.source: file not found"),
        ([model_dir, *_common(data, bad_rewards)], f"{bad_rewards}:2: rewards.x.use: unknown reward 'no_such_reward'"),
        ([model_dir, *_common(no_prompt, rewards)], "data.prompt_field: column 'prompt' not in"),
        ([model_dir, *_common(data, rewards), "--samples", 2, "--k", 4], "--k: pass@4 needs at least 4 samples"),
        ([empty, *_common(data, rewards)], "holds no model (config.json), adapter (adapter_config.json)"),
        ([tmp_path / "missing", *_common(data, rewards)], "MODEL: folder not found"),
        ([model_dir, *_common(data, rewards), "--summary", out], "--summary: is the same file as --out"),
    ]
    for argv, message in cases:
        assert _run(*argv, "--out", out) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
        assert not out.exists()
