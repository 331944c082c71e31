"""The ``reward_model`` built-in on a tiny Llama classifier built from a config and saved to a folder (nothing is
downloaded): its scores are the model's called by hand on each text through the chat template, whatever the
batch size; the normalisations; truncation kept to the completion's end and reported; one model process called
by every alias naming it (its life: tests/core/test_reward_model_process.py); a PEFT adapter merged; composed
from TOML with weights."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from tests.core.conftest import build_tokenizer  # noqa: E402

PROMPTS = ["What is 12 plus 7?", "What is 12 plus 7?", "Natalia sold clips", "Natalia sold clips", "Solve 3 + 4."]
COMPLETIONS = [" The answer is 19.", " 19", " to 48 of her friends in April, and then", " in May.", " 7"]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForSequenceClassification

    out = tmp_path_factory.mktemp("tiny_classifier")
    tok = build_tokenizer()
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_labels=3, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def by_hand(folder, prompts, completions, *, adapter=None):
    """Each conversation alone through the chat template (no padding at all): all three logits."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    out = []
    with torch.no_grad():
        for p, c in zip(prompts, completions):
            text = tok.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": c}],
                                           tokenize=False)
            ids = tok(text, return_tensors="pt", add_special_tokens=False)
            out.append(model(**ids).logits[0].tolist())
    return out


def test_scores_equal_the_model_called_by_hand_at_any_batch_size(classifier_dir):
    from grpo_rewards import reward

    expected = by_hand(classifier_dir, PROMPTS, COMPLETIONS)
    for batch_size in (1, 2, 16):
        fn = reward("reward_model", model=str(classifier_dir), batch_size=batch_size)
        assert fn(COMPLETIONS, prompts=PROMPTS) == pytest.approx([e[0] for e in expected], abs=1e-5), batch_size
    assert len({round(e[0], 6) for e in expected}) == len(expected)  # different texts, different scores
    label2 = reward("reward_model", model=str(classifier_dir), label=2, normalise="sigmoid")
    assert label2(COMPLETIONS, prompts=PROMPTS) == pytest.approx([torch.tensor(e[2]).sigmoid().item() for e in expected],
                                                                 abs=1e-6)
    soft = reward("reward_model", model=str(classifier_dir), label=1, normalise="softmax", batch_size=2)
    assert soft(COMPLETIONS, prompts=PROMPTS) == pytest.approx(
        [torch.tensor(e).softmax(-1)[1].item() for e in expected], abs=1e-6)


def test_every_alias_of_one_model_calls_one_model_process(classifier_dir):
    from grpo_rewards import SafeReward, reward

    a = reward("reward_model", model=str(classifier_dir))
    b = reward("reward_model", model=str(classifier_dir), normalise="sigmoid", label=1)
    assert a.process is b.process and a.process.pid is not None and a.process.pid != os.getpid()
    assert SafeReward(a).isolation == "thread"  # the alias calls the process from the training process


def test_truncation_keeps_the_completions_end_and_is_reported(classifier_dir, caplog):
    from transformers import AutoTokenizer

    from grpo_rewards import reward

    tok = AutoTokenizer.from_pretrained(classifier_dir)
    fn = reward("reward_model", model=str(classifier_dir), max_length=20, batch_size=2)
    texts = [tok.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": c}],
                                     tokenize=False) for p, c in zip(PROMPTS, COMPLETIONS)]
    lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert min(lengths) <= 20 < max(lengths)  # some rows are cut, some are not
    with caplog.at_level("WARNING", logger="grpo.rewards"):
        got = fn(COMPLETIONS, prompts=PROMPTS)
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(classifier_dir).eval()
    with torch.no_grad():
        expected = [model(input_ids=torch.tensor([tok(t, add_special_tokens=False)["input_ids"][-20:]])).logits[0, 0]
                    .item() for t in texts]
    assert got == pytest.approx(expected, abs=1e-5)
    cut = sum(n > 20 for n in lengths)
    assert fn.metrics()["truncated_share"] == pytest.approx(cut / len(texts))
    assert "longer than max_length=20" in caplog.text


def test_a_peft_adapter_is_merged(classifier_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification

    from grpo_rewards import reward

    torch.manual_seed(1)
    base = AutoModelForSequenceClassification.from_pretrained(classifier_dir)
    peft = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="SEQ_CLS",
                                           init_lora_weights=False))
    peft.save_pretrained(tmp_path / "adapter")
    expected = by_hand(classifier_dir, PROMPTS, COMPLETIONS, adapter=str(tmp_path / "adapter"))
    plain = by_hand(classifier_dir, PROMPTS, COMPLETIONS)
    assert [e[0] for e in expected] != pytest.approx([p[0] for p in plain], abs=1e-4)  # the adapter changes scores
    fn = reward("reward_model", model=str(classifier_dir), adapter=str(tmp_path / "adapter"), batch_size=3)
    assert fn(COMPLETIONS, prompts=PROMPTS) == pytest.approx([e[0] for e in expected], abs=1e-5)


@pytest.mark.parametrize(("params", "message"), [
    ({"label": 3}, "label must be within"),
    ({"normalise": "tanh"}, "normalise must be one of"),
    ({"batch_size": 0}, "batch_size must be >= 1"),
    ({"dtype": "int8"}, "dtype must be one of"),
])
def test_bad_parameters_are_refused(classifier_dir, params, message):
    from grpo_rewards import reward

    with pytest.raises(ValueError, match=message):
        reward("reward_model", model=str(classifier_dir), **params)


def test_composed_from_toml_with_weights(classifier_dir, tmp_path):
    from grpo_rewards import load_rewards

    config = tmp_path / "rewards.toml"
    config.write_text(f'[rewards.preference]\nuse = "reward_model"\nmodel = "{classifier_dir}"\nweight = 0.5\n'
                      f'normalise = "sigmoid"\n[rewards.vote]\nuse = "majority_vote"\nweight = 2.0\n')
    composed = load_rewards(str(config))
    comps = ["<answer>4</answer>", "<answer>4</answer>", "<answer>5</answer>"]
    prompts = ["What is 2 + 2?"] * 3
    scores = composed.score(comps, prompts=prompts)
    pref = [torch.tensor(e[0]).sigmoid().item() for e in by_hand(classifier_dir, prompts, comps)]
    assert scores.columns["preference"] == pytest.approx(pref, abs=1e-6)
    assert scores.columns["vote"] == [1.0, 1.0, 0.0]
    assert scores.total == pytest.approx([0.5 * p + 2.0 * v for p, v in zip(pref, [1.0, 1.0, 0.0])], abs=1e-6)


def test_the_shown_example_composes(classifier_dir, tmp_path):
    from grpo_rewards import get_registry, load_rewards

    example = get_registry().reward("reward_model").example
    config = tmp_path / "r.toml"
    config.write_text(example.replace("Skywork/Skywork-Reward-V2-Qwen3-0.6B", str(classifier_dir)))
    scores = load_rewards(str(config)).score(COMPLETIONS, prompts=PROMPTS)
    expected = [torch.tensor(e[0]).sigmoid().item() for e in by_hand(classifier_dir, PROMPTS, COMPLETIONS)]
    assert scores.columns["preference"] == pytest.approx(expected, abs=1e-6)


def test_a_timeout_below_its_load_and_request_deadlines_is_refused(classifier_dir, tmp_path):
    from grpo_rewards import load_rewards
    from grpo_rewards.tomlfile import ConfigError

    config = tmp_path / "r.toml"
    config.write_text(f'[rewards.preference]\nuse = "reward_model"\nmodel = "{classifier_dir}"\ntimeout = 100\n'
                      'request_timeout = 60\nload_timeout = 60\n')
    with pytest.raises(ConfigError, match="can take 120 s .* not below its timeout of 100 s"):
        load_rewards(str(config))
    config.write_text(config.read_text().replace("timeout = 100", "timeout = 121"))
    assert load_rewards(str(config)).aliases == ["preference"]
