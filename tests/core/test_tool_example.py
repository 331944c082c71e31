"""The tool example (examples/tool_calculator.toml, grpo_core.demo.tool_run): its task, its warm-up conversations
against what a rollout appends, and one GRPO step of each arm on a tiny model, so that the example cannot rot.
The curves themselves are benchmarks/tool_example.py's (minutes, not a test)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from grpo_core.demo.tiny import TinySpec

CONFIG = Path(__file__).parents[2] / "examples" / "tool_calculator.toml"
BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def tool_tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from grpo_core.demo.tool_model import build_tool_model
    from grpo_core.demo.tool_task import make_split

    rows = make_split("warmup", size=200)
    out = build_tool_model(tmp_path_factory.mktemp("tool_model"), [r["prompt"] for r in rows],
                           TinySpec(hidden=16, intermediate=32, max_positions=128))
    return AutoTokenizer.from_pretrained(out)


def test_multiplication_source_splits_are_disjoint_and_options_checked():
    from grpo_core.demo.tool_task import parse_source
    from grpo_rewards.plugins import get_registry

    load = get_registry().get("dataset_sources", "demo")
    spec = {"source": "demo:multiplication?max_a=99&max_b=30&size=300", "split": "train"}
    train, test = load(spec), load({**spec, "split": "test"})
    assert len(train) == len(test) == 300 and load(spec) == train
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in test}
    assert all(int(r["answer"]) == r["a"] * r["b"] and 10 <= r["b"] <= 30 for r in train)
    for bad in ("demo:multiplication?max_a=x", "demo:multiplication?size", "demo:multiplication?digits=3"):
        with pytest.raises(ValueError, match="demo:multiplication"):
            parse_source(bad)


def test_warmup_calls_are_right_for_the_given_share_only():
    from grpo_core.demo.tool_task import make_split, warmup_expressions

    rows = make_split("warmup", size=2000)
    expressions = warmup_expressions(rows, 0.2, seed=0)
    right = sum(e == r["prompt"] for e, r in zip(expressions, rows, strict=True)) / len(rows)
    assert 0.17 < right < 0.23
    for e, r in zip(warmup_expressions(rows, 0.0, seed=1), rows, strict=True):  # every one slips, the same way
        assert e[:-1] == r["prompt"][:-1] and int(e[-1]) == (int(r["prompt"][-1]) + 1) % 10


def test_warmup_conversation_is_the_rollouts_and_trains_on_the_models_turns_only(tool_tokenizer):
    """The warm-up's conversation after the prompt is the chat template's rendering of it, its tool segment the
    ids a rollout appends (tool_suffix_ids), its call read by the hermes parser, and only the model's turns carry
    labels."""
    from grpo_core.demo.tool_model import answer_demonstration, tool_demonstration
    from grpo_core.demo.warmup import sft_batch
    from grpo_core.generation.tools.builtin import calculator
    from grpo_core.generation.tools.formats import detect_format, parse_tool_calls
    from grpo_core.generation.tools.toolset import tool_schema

    tok = tool_tokenizer
    assert detect_format(tok.chat_template) == "hermes"
    schemas = [tool_schema(calculator)]
    user = [{"role": "user", "content": "437*58"}]
    prompt = tok.apply_chat_template(user, tools=schemas, tokenize=False, add_generation_prompt=True)
    segments = tool_demonstration(tok, "120*11")  # another problem's numbers: the answer is the tool's, read back
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "120*11"}}}
    whole = tok.apply_chat_template(user + [{"role": "assistant", "content": "", "tool_calls": [call]},
                                            {"role": "tool", "name": "calculator", "content": "1320"},
                                            {"role": "assistant", "content": "<answer>1320</answer>"}],
                                    tools=schemas, tokenize=False)
    assert prompt + "".join(text for text, _ in segments) == whole
    assert [trained for _, trained in segments] == [True, False, True]
    [parsed] = parse_tool_calls(segments[0][0], "hermes")
    assert (parsed.name, parsed.arguments, parsed.error) == ("calculator", {"expression": "120*11"}, "")
    no_tools = tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    assert "<tools>" not in no_tools and "<tools>calculator</tools>" in prompt

    batch = sft_batch(tok, [prompt, no_tools], [segments, answer_demonstration("25346")])
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in (prompt, *(s for s, _ in segments))]
    p, c, t, a = lengths
    assert (labels[:p] == -100).all() and (labels[p + c : p + c + t] == -100).all()
    assert (labels[p : p + c] == ids[p : p + c]).all() and (labels[p + c + t : p + c + t + a] == ids[p + c + t :][:a]).all()
    assert tok.decode(ids[p + c : p + c + t]) == segments[1][0]
    assert int(batch["attention_mask"][1].sum()) == len(tok(no_tools + "<answer>25346</answer><eos>",
                                                            add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("arm", ["tools", "control"])
def test_example_config_runs_one_step_of_each_arm(tmp_path, arm):
    """The example's config and run_tool_arm end to end on a tiny model: build, warm-up, one GRPO step, the curve
    from the run's own evaluations; the tool arm's rollouts call the calculator, the control's do not."""
    from grpo_core.demo.tool_run import ToolExampleSettings, run_tool_arm
    from grpo_core.run_folder.layout import METRICS_FILE, read_jsonl

    overrides = ["grpo.max_steps=1", "grpo.prompts_per_step=2", "generation.num_generations=2", "data.eval_size=4",
                 'data.source="demo:multiplication?max_a=99&max_b=30&size=200"',
                 "logging.eval_every=1", "logging.progress=false"] + (["tools.names=[]"] if arm == "control" else [])
    # enough warm-up steps for the tool arm to open calls (their digits still wrong), not for the target
    settings = ToolExampleSettings(hidden=16, warmup_steps=40, warmup_max_steps=40, warmup_check_every=40,
                                   warmup_probe_size=4, warmup_batch_size=8, readback_target=1.0)
    spec = importlib.util.spec_from_file_location("tool_rollouts", BENCHMARKS / "tool_rollouts.py")
    meter = importlib.util.module_from_spec(spec)  # the benchmark's meter, as benchmarks/tool_example.py uses it
    spec.loader.exec_module(meter)
    watch, rollout_numbers = meter.watch, meter.rollout_numbers
    parts: list = []
    result = run_tool_arm(CONFIG, overrides, tmp_path, settings, on_trainer=lambda t: parts.append(watch(t)))
    assert result["tools"] == (arm == "tools") and result["steps"] == 1 and result["warmup_steps"] == 40
    assert (result["warmup_readback"] is not None) == (arm == "tools")
    assert [step for step, _ in result["curve"]] == [0, 1] and all(0 <= acc <= 1 for _, acc in result["curve"])
    metrics = read_jsonl(Path(result["run_dir"]) / METRICS_FILE)
    trained = [m for m in metrics if "step_time" in m]
    assert len(trained) == 1
    numbers = rollout_numbers(metrics, parts[0], skip=0)
    assert numbers["turns/s"] > 0 and numbers["model share"] + numbers["tools share"] + numbers["trainer share"] == \
        pytest.approx(1.0)
    if arm == "tools":
        assert trained[0]["tools/turns_mean"] >= 1 and "tools/model_seconds" in trained[0]
        assert numbers["tool calls/s"] > 0 and numbers["tools share"] > 0
    else:
        assert not any(k.startswith("tools/") for k in trained[0])
