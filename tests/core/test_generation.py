"""Generation: EOS masks and truncation, the transformers backend through the registry, greedy vs
sampled groups; the plugin registrations (backend, demo data source) and the demo task's splits."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from grpo_core.generation.transformers_backend import completion_mask_from_eos  # noqa: E402


def test_mask_covers_up_to_the_first_eos_and_flags_truncation():
    ids = torch.tensor([[5, 6, 1, 7, 1], [5, 6, 7, 8, 9], [1, 0, 0, 0, 0], [5, 2, 6, 6, 6]])
    mask, truncated = completion_mask_from_eos(ids, [1, 2])
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]]
    assert truncated.tolist() == [False, True, False, False]


@pytest.fixture(scope="module")
def tiny(arithmetic_model_dir):
    from grpo_core.config import config_from_dict
    from grpo_core.policy.models import load_model_and_tokenizer

    path = arithmetic_model_dir
    cfg = config_from_dict({
        "model": {"name_or_path": str(path), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "chat_template": False},
        "generation": {"num_generations": 3, "max_completion_length": 6},
        "rewards": {"correct": {"use": "exact_match"}},
    })
    model, tok = load_model_and_tokenizer(cfg)
    return cfg, model, tok


def test_transformers_backend_from_the_registry(tiny):
    from grpo_core.generation.transformers_backend import TransformersBackend, build_backend

    cfg, model, tok = tiny
    backend = build_backend(cfg, model, tok)
    assert isinstance(backend, TransformersBackend)
    torch.manual_seed(0)
    gen = backend.generate(["1+2=", "13+4="], 3)
    n = 6
    assert gen.prompt_ids.shape[0] == gen.completion_ids.shape[0] == n and len(gen.completions_text) == n
    assert gen.completion_ids.shape[1] <= 6
    assert (gen.prompt_ids[:3] == gen.prompt_ids[0]).all() and (gen.prompt_mask[0, 0] == 0)  # left padded
    # pad after the mask, EOS (if any) is the last masked token, truncated rows have no EOS
    assert ((gen.completion_ids == tok.pad_token_id) | (gen.completion_mask == 1)).all()
    lengths = gen.completion_mask.sum(1)
    for row, length, cut in zip(gen.completion_ids, lengths, gen.truncated, strict=True):
        assert cut == (row[length - 1] != tok.eos_token_id)
    assert model.training  # generation restores the training mode
    greedy = backend.generate(["1+2=", "1+2="], 2, greedy=True)
    assert len(set(greedy.completions_text)) == 1  # greedy: the same text every time


def test_unknown_backend_is_a_clear_error(tiny):
    import dataclasses

    from grpo_core.generation.transformers_backend import build_backend
    from grpo_rewards import PluginError

    cfg, model, tok = tiny
    bad = dataclasses.replace(cfg, generation=dataclasses.replace(cfg.generation, backend="vllmm"))
    with pytest.raises(PluginError, match="unknown generation backend 'vllmm'"):
        build_backend(bad, model, tok)


def test_demo_source_splits_are_disjoint_and_deterministic():
    from grpo_core.demo.task import load_source, parse_source

    spec = {"source": "demo:arithmetic?max_operand=30&ops=+-", "split": "train"}
    train = load_source(spec)
    test = load_source({**spec, "split": "test"})
    assert load_source(spec) == train
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in test}
    assert {r["op"] for r in train} == {"+", "-"} and all(int(r["answer"]) >= 0 for r in train)
    for bad in ("demo:arithmetik", "demo:arithmetic?max_operand=x", "demo:arithmetic?size"):
        with pytest.raises(ValueError, match="demo"):
            parse_source(bad)


def test_completion_format_scores_full_marks_with_the_quickstart_rewards():
    from grpo_core.config import load_config
    from grpo_core.demo.run import QUICKSTART
    from grpo_core.demo.task import completion, problem

    cfg = load_config(QUICKSTART)
    row = problem(27, "+", 15)
    assert completion(row) == "<reasoning>24</reasoning>\n<answer>42</answer>"
    scores = cfg.rewards.score([completion(row), "<answer>41</answer>"], answer=["42", "42"])
    assert scores.columns["correct"] == [2.0, 0.0]
    assert scores.columns["format"][0] > 0 and scores.columns["integer"][0] > 0
    assert scores.total[0] == pytest.approx(3.0) and 0 < scores.columns["proximity"][1] < 0.5


def test_examples_quickstart_is_the_embedded_config():
    from pathlib import Path

    from grpo_core.demo.run import QUICKSTART

    example = Path(__file__).parents[2] / "examples" / "quickstart.toml"
    assert example.read_text() == QUICKSTART.read_text()
