"""The Python API refuses in one ConfigError naming the argument what would otherwise fail deep inside peft,
torch or a never-ending read: an IA3 ``PeftModel``, a ``LoraConfig`` whose target modules the model does not
have, a tokenizer with more tokens than the model's embeddings, and an iterable dataset with no length and no
``grpo.max_steps`` (with one, only the rows the steps use are read)."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
datasets = pytest.importorskip("datasets")

from grpo_rewards.errors import ConfigError  # noqa: E402
from tests.core.conftest import arithmetic_rows, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def demo_model(arithmetic_model_dir):
    return arithmetic_model_dir, arithmetic_rows(40)


def _args(tmp_path, **grpo):
    return {"data": {"chat_template": False},
            "generation": {"num_generations": 2, "max_completion_length": 4},
            "grpo": {"prompts_per_step": 2, **grpo},
            "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False}}


def _load(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), AutoTokenizer.from_pretrained(model_dir)


def one_line(caught: pytest.ExceptionInfo) -> str:
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def test_an_ia3_peft_model_is_one_line(demo_model, tmp_path):
    from peft import IA3Config, get_peft_model

    from grpo_core import GRPOTrainer

    model_dir, rows = demo_model
    model, tok = _load(model_dir)
    ia3 = get_peft_model(model, IA3Config(target_modules=["k_proj", "down_proj"], feedforward_modules=["down_proj"],
                                          task_type="CAUSAL_LM"))
    with pytest.raises(ConfigError) as caught:
        GRPOTrainer(model=ia3, processing_class=tok, reward_funcs="xml_count", train_dataset=rows,
                    args=_args(tmp_path, max_steps=1))
    assert one_line(caught) == ("GRPOTrainer: model: a PeftModel of type IA3; only LoRA adapters train here "
                                "(a peft.LoraConfig)")


def test_a_lora_config_whose_target_modules_do_not_exist_is_one_line(demo_model, tmp_path):
    from peft import LoraConfig

    from grpo_core import GRPOTrainer

    model_dir, rows = demo_model
    model, tok = _load(model_dir)
    with pytest.raises(ConfigError) as caught:
        GRPOTrainer(model=model, processing_class=tok, reward_funcs="xml_count", train_dataset=rows,
                    peft_config=LoraConfig(r=4, target_modules=["no_such_proj"]), args=_args(tmp_path, max_steps=1))
    assert one_line(caught).startswith("GRPOTrainer: peft_config: target_modules ['no_such_proj'] match no module "
                                       "of the model: ")
    assert not (tmp_path / "run").exists()


def test_a_tokenizer_larger_than_the_embeddings_is_one_line(demo_model, tmp_path):
    from grpo_core import GRPOTrainer

    model_dir, rows = demo_model
    model, _ = _load(model_dir)
    big = build_tokenizer(vocab_size=model.get_input_embeddings().num_embeddings + 200)
    with pytest.raises(ConfigError) as caught:
        GRPOTrainer(model=model, processing_class=big, reward_funcs="xml_count", train_dataset=rows,
                    args=_args(tmp_path, max_steps=1))
    rows_of = model.get_input_embeddings().num_embeddings
    assert one_line(caught) == (f"GRPOTrainer: processing_class: the tokenizer has {len(big)} tokens and the model's "
                                f"embeddings {rows_of} rows: resize them (model.resize_token_embeddings) or pass the "
                                "model's own tokenizer")


def test_an_endless_iterable_dataset_needs_max_steps_and_then_reads_what_the_steps_use(demo_model, tmp_path):
    from grpo_core import GRPOTrainer

    model_dir, rows = demo_model
    read = []

    def endless():
        for row in itertools.cycle(rows):
            read.append(1)
            yield row

    stream = datasets.IterableDataset.from_generator(endless)
    with pytest.raises(ConfigError) as caught:
        GRPOTrainer(model=str(model_dir), reward_funcs="xml_count", train_dataset=stream, args=_args(tmp_path))
    assert one_line(caught) == ("GRPOTrainer: train_dataset: an iterable dataset has no length (it may never end): "
                                "set grpo.max_steps, and the rows the steps need are read")
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs="xml_count", train_dataset=stream,
                          args=_args(tmp_path, max_steps=3))
    assert len(trainer.rows) == 3 * 2  # max_steps x prompts_per_step, from a source that never ends
