"""Reward models in ``reward_funcs`` as TRL takes them (a path, or a loaded ``AutoModelForSequenceClassification``
with ``reward_processing_classes``), scored as ``trl.GRPOTrainer._calculate_rewards`` scores them (prompt +
completion, one right-padded batch, no gradients, the logit of label 0), inside the reward isolation. A tiny
Llama classifier is built from a config and saved to a folder: nothing is downloaded."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")

from tests.core.conftest import arithmetic_rows, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForSequenceClassification

    out = tmp_path_factory.mktemp("tiny_reward_model")
    tok = build_tokenizer()
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_labels=1, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


PROMPTS = ["What is 12 plus 7?", "What is 12 plus 7?", "Natalia sold clips", "Natalia sold clips"]
COMPLETIONS = [" The answer is 19.", " 19", " to 48 of her friends in April, and then", " in May."]


def by_hand(model, tok, prompts, completions):
    """Each text alone (no padding at all), the logit of label 0."""
    out = []
    with torch.no_grad():
        for p, c in zip(prompts, completions):
            ids = tok(p + c, return_tensors="pt", add_special_tokens=False)
            out.append(model(**ids).logits[0, 0].item())
    return out


def test_a_reward_model_by_path_and_as_an_object(reward_model_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from grpo_core.api import compose_reward_funcs

    model = AutoModelForSequenceClassification.from_pretrained(reward_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(reward_model_dir)
    expected = by_hand(model, tok, PROMPTS, COMPLETIONS)
    by_path = compose_reward_funcs([str(reward_model_dir)])
    assert by_path.aliases == [reward_model_dir.name]  # TRL's name: the model id's last part
    entry = by_path.entries[0].fn
    assert entry.isolation == "thread"  # under SafeReward, in the training process
    scores = by_path.score(COMPLETIONS, prompts=PROMPTS)
    assert scores.columns[reward_model_dir.name] == pytest.approx(expected, abs=1e-5)
    assert len(set(expected)) == 4  # four different texts, four different scores: not a constant

    def one(completions, **kw):
        return [1.0] * len(completions)

    mixed = compose_reward_funcs([one, model], reward_weights=[1.0, 2.0], reward_processing_classes=[None, tok])
    scores = mixed.score(COMPLETIONS, prompts=PROMPTS)
    assert scores.columns[mixed.aliases[1]] == pytest.approx(expected, abs=1e-5)
    assert scores.total == pytest.approx([1.0 + 2.0 * e for e in expected], abs=1e-5)


def test_trls_own_batch_is_what_we_score(reward_model_dir):
    """The batch TRL builds (its tokenizer call, copied from trl 1.16) gives the same logits as ours."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from grpo_core.trl_reward_models import RewardModel

    model = AutoModelForSequenceClassification.from_pretrained(reward_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(reward_model_dir)
    texts = [p + c for p, c in zip(PROMPTS, COMPLETIONS)]
    inputs = tok(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    assert (inputs["attention_mask"] == 0).any()  # the batch is padded: pooling must skip the pads
    with torch.inference_mode():
        trl_scores = model(**inputs).logits[:, 0].tolist()
    assert RewardModel(model, tok)(COMPLETIONS, prompts=PROMPTS) == pytest.approx(trl_scores, abs=1e-6)


def test_a_bad_reward_processing_classes_list(reward_model_dir):
    from grpo_core.api import compose_reward_funcs
    from grpo_rewards.errors import UserError

    with pytest.raises(UserError, match="reward_processing_classes: must be a list of 2"):
        compose_reward_funcs([len, str(reward_model_dir)], reward_processing_classes=[None])


def test_grpo_trainer_trains_with_a_reward_model(arithmetic_model_dir, reward_model_dir, tmp_path):
    from grpo_core import GRPOTrainer

    rows = arithmetic_rows(40)[:8]
    trainer = GRPOTrainer(model=str(arithmetic_model_dir), reward_funcs=str(reward_model_dir),
                          train_dataset=datasets.Dataset.from_list(rows),
                          args={"model": {"dtype": "float32"}, "data": {"chat_template": False},
                                "generation": {"num_generations": 2, "max_completion_length": 4},
                                "grpo": {"prompts_per_step": 2, "max_steps": 1},
                                "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False}})
    out = trainer.train()
    assert out.global_step == 1 and trainer.state.log_history[0][f"rewards/{reward_model_dir.name}/mean"] != 0


def test_a_reward_model_by_its_hub_id(reward_model_dir, tmp_path, monkeypatch):
    """TRL's ``reward_funcs="org/name"``: no reward has that name, so it is the Hub repo's model (here from an
    offline Hub cache); a name that is neither stays an unknown reward."""
    import huggingface_hub.constants as hub_constants

    from grpo_core.api import compose_reward_funcs
    from grpo_rewards.tomlfile import ConfigError

    snapshot = tmp_path / "models--org--tiny-rm" / "snapshots" / ("0" * 40)
    snapshot.parent.mkdir(parents=True)
    snapshot.symlink_to(reward_model_dir, target_is_directory=True)
    (tmp_path / "models--org--tiny-rm" / "refs").mkdir()
    (tmp_path / "models--org--tiny-rm" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path))
    by_id = compose_reward_funcs(["org/tiny-rm"])
    assert by_id.aliases == ["tiny-rm"]
    by_path = compose_reward_funcs([str(reward_model_dir)])
    expected = by_path.score(COMPLETIONS, prompts=PROMPTS).columns[reward_model_dir.name]
    assert by_id.score(COMPLETIONS, prompts=PROMPTS).columns["tiny-rm"] == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ConfigError, match="unknown reward"):
        compose_reward_funcs(["not_a_reward_or_repo"])


def test_one_tokenizer_for_two_rewards_is_refused_as_trl_refuses_it(reward_model_dir):
    from transformers import AutoTokenizer

    from grpo_core.api import compose_reward_funcs

    tok = AutoTokenizer.from_pretrained(reward_model_dir)
    with pytest.raises(ValueError, match="must match"):
        compose_reward_funcs([len, str(reward_model_dir)], reward_processing_classes=tok)
    one = compose_reward_funcs(str(reward_model_dir), reward_processing_classes=tok)
    assert one.entries[0].fn.fn.tokenizer is tok
