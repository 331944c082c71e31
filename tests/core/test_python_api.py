"""``grpo_core.GRPOTrainer``: TRL's signature over the project's trainer. Objects in (a PeftModel, a
tokenizer, a LoraConfig, datasets of every kind, callables with TRL's conventions, compose() results and
registry names mixed, with weights), the same trainer and the same numbers as the dict/TOML path, the TOML
path's one-line errors, and callables isolated like registry rewards (a raise scored None, a hang cut off)."""

from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
datasets = pytest.importorskip("datasets")

from grpo_rewards.errors import UserError  # noqa: E402
from tests.core.conftest import arithmetic_rows  # noqa: E402


@pytest.fixture(scope="module")
def demo_model(arithmetic_model_dir):
    return arithmetic_model_dir, arithmetic_rows(40)


def _args(tmp_path, **grpo):
    return {"data": {"chat_template": False},
            "generation": {"num_generations": 4, "max_completion_length": 6},
            "grpo": {"learning_rate": 1e-2, "prompts_per_step": 2, "max_steps": 2, **grpo},
            "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False}}


def _load(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), AutoTokenizer.from_pretrained(model_dir)


from api_rewards import length_reward, sleepy_reward  # noqa: E402  (module level: each runs in its own process)


def test_peft_model_dataset_callables_and_registry_names(demo_model, tmp_path):
    from peft import LoraConfig, get_peft_model

    from grpo_core import GRPOTrainer, Trainer
    from grpo_rewards import compose
    from grpo_rewards.builtins.xml_count import xml_count

    model_dir, rows = demo_model
    model, tok = _load(model_dir)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                  task_type="CAUSAL_LM"))
    before = {n: p.detach().clone() for n, p in peft_model.named_parameters() if "lora_B" in n}
    seen = []

    def trl_style(prompts, completions, completion_ids, trainer_state, answer, **kwargs):  # TRL's keyword call
        seen.append((list(prompts), list(completions), completion_ids, trainer_state, list(answer)))
        return [1.0 if a in c else 0.0 for c, a in zip(completions, answer)]

    trainer = GRPOTrainer(model=peft_model, processing_class=tok,
                          reward_funcs=[trl_style, "xml_count", compose({"fmt": (xml_count(), 2.0)}), length_reward],
                          reward_weights=[1.0, 0.5, 0.25, 1.0],
                          train_dataset=datasets.Dataset.from_list(rows[:8]), eval_dataset=rows[8:11],
                          args={**_args(tmp_path), "logging": {**_args(tmp_path)["logging"], "eval_every": 2}})
    assert isinstance(trainer, Trainer) and trainer.model is peft_model
    assert trainer.cfg.rewards.aliases == ["trl_style", "xml_count", "fmt", "length_reward"]
    assert trainer.cfg.rewards.weights == [1.0, 0.5, 0.5, 1.0]
    assert trainer.cfg.lora.enabled and trainer.cfg.lora.r == 4 and trainer.cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert trainer.cfg.rewards.entries[3].fn.isolation == "process"  # a module-level function: its own process
    result = trainer.train()
    assert result["step"] == 2
    prompts, completions, ids, state, answers = seen[0]
    assert prompts[0] in {r["prompt"] for r in rows[:8]} and len(prompts) == len(completions) == len(ids) == 8
    assert all(isinstance(i, list) and all(isinstance(t, int) for t in i) for i in ids)
    assert [s[3].global_step for s in seen] == [0, 1, 2] and state.max_steps == 2  # 2: the evaluation after step 2
    assert len(seen[2][0]) == 3  # one greedy completion per held-out row
    assert answers[0] == next(r["answer"] for r in rows if r["prompt"] == prompts[0])
    moved = [n for n, p in peft_model.named_parameters() if "lora_B" in n and not torch.equal(p, before[n])]
    assert moved  # the user's own PeftModel object was trained
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {"rewards/trl_style", "rewards/xml_count", "rewards/fmt", "rewards/length_reward"} <= set(metrics[-1])
    assert "eval/rewards/trl_style" in metrics[-1] and len(trainer.eval_rows) == 3  # the eval_dataset, held out
    assert {r["prompt"] for r in trainer.eval_rows} == {r["prompt"] for r in rows[8:11]}


def test_objects_give_the_numbers_of_the_dict_path(demo_model, tmp_path):
    """A model object + LoraConfig + list of dicts + a registry name == the same run described by name."""
    from peft import LoraConfig

    from grpo_core import GRPOTrainer, Trainer, config_from_dict

    model_dir, rows = demo_model
    data_file = tmp_path / "rows.jsonl"
    data_file.write_text("".join(json.dumps(r) + "\n" for r in rows[:8]))
    by_name = _args(tmp_path / "a")
    by_name["model"] = {"name_or_path": str(model_dir), "dtype": "float32"}
    by_name["data"]["source"] = str(data_file)
    by_name["lora"] = {"enabled": True, "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    by_name["rewards"] = {"xml_count": {"use": "xml_count"}}
    a = Trainer(config_from_dict(by_name)).train()

    model, tok = _load(model_dir)
    args = _args(tmp_path / "b")
    args["model"] = {"dtype": "float32"}
    b = GRPOTrainer(model=model, processing_class=tok, reward_funcs="xml_count", train_dataset=rows[:8],
                    peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
                    args=args).train()
    for key in ("reward/mean", "loss", "grad_norm", "completion_length/mean"):
        assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), key


def test_dataset_kinds(demo_model):
    from grpo_core.config import DataConfig
    from grpo_core.dataset_objects import rows_from_object

    _, rows = demo_model
    cfg = DataConfig(source="<train_dataset>", limit=5)
    want = rows[:5]
    assert rows_from_object(rows, cfg) == want
    assert rows_from_object(datasets.Dataset.from_list(rows), cfg) == want
    assert rows_from_object(datasets.Dataset.from_list(rows).to_iterable_dataset(), cfg) == want
    pandas = pytest.importorskip("pandas")
    got = rows_from_object(pandas.DataFrame(rows), cfg)
    assert [r["prompt"] for r in got] == [r["prompt"] for r in want] and got[0]["a"] == want[0]["a"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"train_dataset": [{"question": "1+1="}]},
     "data.prompt_field: column 'prompt' not in train_dataset (columns: question)"),
    ({"train_dataset": [{"prompt": "1+1="}, {"prompt": 3}]}, "train_dataset: prompt: row 2: must be text"),
    ({"train_dataset": [{"prompt": "1+1="}, "x"]}, "train_dataset: row 2: expected a dict, got a string"),
    ({"train_dataset": {"train": None}}, "train_dataset: expected a datasets.Dataset"),
    ({"reward_funcs": [len, 3]}, "GRPOTrainer: reward_funcs[1]: expected a callable, a compose() result or a "
                                  "registry name, got int 3"),
    ({"reward_funcs": ["no_such_reward"]}, "GRPOTrainer: reward_funcs[0]: unknown reward 'no_such_reward'"),
    ({"reward_funcs": [len, len], "reward_weights": [1.0]}, "GRPOTrainer: reward_weights: must be a list of 2 numbers"),
    ({"reward_funcs": [len], "reward_weights": [float("nan")]}, "GRPOTrainer: reward_weights[0]: must be a finite"),
    ({"reward_funcs": []}, "GRPOTrainer: reward_funcs: is empty"),
    ({"model": object()}, "GRPOTrainer: model: expected a transformers or peft model or a name, got object"),
    ({"args": 3}, "GRPOTrainer: args: expected a trl.GRPOConfig, a RunConfig, a dict of sections or a TOML path, got int"),
    ({"max_steps": 0}, "<dict>: grpo.max_steps: must be >= 1 and <= 1000000000, got 0"),
])
def test_bad_objects_fail_in_one_line_before_loading(demo_model, tmp_path, kwargs, message):
    from grpo_core import GRPOTrainer

    model_dir, rows = demo_model
    call = {"model": str(model_dir), "reward_funcs": ["xml_count"], "train_dataset": rows[:4],
            "args": _args(tmp_path, max_steps=kwargs.pop("max_steps", 2)), **kwargs}
    with pytest.raises(UserError) as err:
        GRPOTrainer(**call)
    assert message in str(err.value), str(err.value)
    assert len(str(err.value).splitlines()) == 1
    assert not (tmp_path / "run").exists()  # nothing written, nothing trained


def test_dataset_dict_names_the_split(demo_model, tmp_path):
    from grpo_core import GRPOTrainer

    model_dir, rows = demo_model
    ds = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:4])})
    with pytest.raises(UserError, match=r"train_dataset: a dataset with splits \('train'\); pass one of them"):
        GRPOTrainer(model=str(model_dir), reward_funcs="xml_count", train_dataset=ds, args=_args(tmp_path))


def test_a_raising_or_hanging_callable_is_isolated(demo_model, tmp_path):
    """A callable that raises on some rows loses those rows only; one that hangs is cut off at the
    ``[rewards] timeout`` the args give; the run goes on and counts the failures."""
    from grpo_core import GRPOTrainer

    model_dir, rows = demo_model

    def picky(completions, prompts, **kwargs):
        if any(p.startswith("1") for p in prompts):
            raise ValueError("no ones")
        return [1.0] * len(completions)

    args = _args(tmp_path)
    args["rewards"] = {"timeout": 2, "max_consecutive_failures": 0}
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[picky, sleepy_reward, "xml_count"],
                          train_dataset=rows[:8], args=args)
    start = time.monotonic()
    result = trainer.train()
    assert time.monotonic() - start < 55  # two steps, each cut off after 2 s instead of 30 (a loaded machine)
    assert result["step"] == 2
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["rewards/sleepy_reward/failures"] == 2
    assert trainer.cfg.rewards.entries[1].fn.stats.failure_kinds == {"timeout": 2}


def test_toml_path_and_runconfig_as_args(demo_model, tmp_path):
    from grpo_core import GRPOTrainer, load_config

    model_dir, rows = demo_model
    data_file = tmp_path / "rows.jsonl"
    data_file.write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    toml = tmp_path / "run.toml"
    toml.write_text(f'[model]\nname_or_path = "{model_dir}"\n[data]\nsource = "rows.jsonl"\nchat_template = false\n'
                    f'[grpo]\nmax_steps = 1\nprompts_per_step = 2\n[generation]\nnum_generations = 2\n'
                    f'max_completion_length = 4\n[logging]\noutput_dir = "{tmp_path / "run"}"\nprogress = false\n'
                    f'plot = false\n[rewards.fmt]\nuse = "xml_count"\n')
    by_path = GRPOTrainer(args=str(toml))
    assert by_path.cfg.data.source == str(data_file) and by_path.cfg.rewards.aliases == ["fmt"]
    by_config = GRPOTrainer(args=load_config(toml), reward_funcs=[length_reward])
    assert by_config.cfg.rewards.aliases == ["length_reward"] and by_config.cfg.model.name_or_path == str(model_dir)
    assert by_config.train()["step"] == 1


def test_full_fine_tune_of_a_model_object_keeps_its_start_as_the_kl_reference(demo_model, tmp_path):
    """A plain model object (no LoRA) with ``beta`` > 0: the reference is a frozen copy of the object as handed
    over (it has no loadable name), not a model loaded from its name."""
    from grpo_core import GRPOTrainer
    from grpo_core.policy import models

    model_dir, rows = demo_model
    model, tok = _load(model_dir)
    model.config._name_or_path = ""  # as for a model built in memory
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=[length_reward], train_dataset=rows[:4],
                          args=_args(tmp_path, beta=0.04, max_steps=1))
    assert trainer.cfg.model.name_or_path == "<LlamaForCausalLM object>"
    result = trainer.train()
    reference = models._REFERENCES[trainer.model]
    assert result["kl"] >= 0 and not any(p.requires_grad for p in reference.parameters())
    for name, p in reference.named_parameters():
        assert torch.equal(p, start[name]), name  # the start, untouched by the update
    assert any(not torch.equal(p, start[n]) for n, p in trainer.model.named_parameters())
