"""``args=trl.GRPOConfig(...)`` (or a flat dict of its keys) runs with TRL's values and TRL's batch arithmetic,
tested against the installed ``trl.GRPOConfig`` itself: the one table's defaults are TRL's, every GRPO field
of TRL's is in it, the step count of ``num_train_epochs`` is what TRL's own sampler and transformers' rounding
give, and a field we cannot honour is one error naming it."""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")

from transformers import TrainingArguments  # noqa: E402

from grpo_core.config.sections import SECTIONS  # noqa: E402
from grpo_core.config.trl_names import TRL_FIELDS, enum_value, same_fields, to_ours  # noqa: E402
from grpo_core.trl_args import sections_from_trl, steps_of_epochs  # noqa: E402
from grpo_rewards.errors import UserError  # noqa: E402
from tests.core.conftest import arithmetic_rows  # noqa: E402


def config(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return trl.GRPOConfig(**{"output_dir": "out", "use_cpu": True, "report_to": "none", **kw})


def test_the_table_holds_trls_defaults_and_every_grpo_field():
    fields = {f.name: f for f in dataclasses.fields(trl.GRPOConfig)}
    for name, entry in TRL_FIELDS.items():
        assert name in fields, name
        f = fields[name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        assert enum_value(default) == entry.default, name
    own = set(fields) - {f.name for f in dataclasses.fields(TrainingArguments)}
    assert own <= set(TRL_FIELDS), sorted(own - set(TRL_FIELDS))  # no GRPO field left without a decision


def resolved(sections):
    """The sections with our defaults filled in (a key left out is one whose TRL value is our default)."""
    return {name: {**dataclasses.asdict(cls()), **sections.get(name, {})} for name, cls in SECTIONS.items()}


def test_a_default_config_gives_trls_values():
    sec = resolved(sections_from_trl(config()).sections)
    assert sec["grpo"]["learning_rate"] == 1e-6 and sec["grpo"]["seed"] == 42 and sec["grpo"]["adam_beta2"] == 0.999
    assert sec["generation"]["max_completion_length"] == 512 and sec["generation"]["num_generations"] == 8
    assert sec["grpo"]["prompts_per_step"] == 1  # 8 rows per device, 8 completions each prompt
    assert sec["data"]["max_prompt_length"] is None and sec["logging"]["log_every"] == 10
    assert sec["checkpoint"]["keep_last"] == 10**6 and sec["checkpoint"]["every"] == 500
    assert sec["checkpoint"]["every_minutes"] == 0.0
    assert "hub" not in sections_from_trl(config()).sections  # TRL's hub values are our defaults: nothing to say
    # every carried-over value is TRL's own
    args = config(temperature=0.7, top_k=5, beta=0.04, loss_type="grpo", min_p=0.1, seed=3)
    sec = resolved(sections_from_trl(args).sections)
    for name, ours in same_fields().items():
        section, key = ours.split(".")
        assert sec[section][key] == to_ours(name, getattr(args, name)), name
    assert sec["generation"]["min_p"] == 0.1 and sec["generation"]["temperature"] == 0.7


@pytest.mark.parametrize("kw, prompts, ga", [
    ({"per_device_train_batch_size": 3, "num_generations": 3}, 1, 1),
    ({"per_device_train_batch_size": 6, "num_generations": 3, "gradient_accumulation_steps": 2}, 4, 2),
    ({"per_device_train_batch_size": 4, "num_generations": 2, "generation_batch_size": 8,
      "gradient_accumulation_steps": 2}, 4, 2),
])
def test_batch_arithmetic_is_trls(kw, prompts, ga):
    args = config(**kw)
    sec = resolved(sections_from_trl(args).sections)
    assert sec["grpo"]["prompts_per_step"] * args.num_generations == args.generation_batch_size  # TRL's own number
    assert (sec["grpo"]["prompts_per_step"], sec["grpo"]["gradient_accumulation_steps"]) == (prompts, ga)


@pytest.mark.parametrize("rows, kw", [
    (17, {"per_device_train_batch_size": 3, "num_generations": 3}),
    (17, {"per_device_train_batch_size": 6, "num_generations": 3, "num_iterations": 2}),
    (10, {"per_device_train_batch_size": 4, "num_generations": 2, "num_train_epochs": 1.5}),
])
def test_steps_of_epochs_is_trls_count(rows, kw):
    """TRL's sampler length and transformers' rounding (Trainer._inner_training_loop) give TRL's optimizer steps;
    ours times num_iterations is that count."""
    from trl.trainer.utils import RepeatSampler

    args = config(**kw)
    sampler = RepeatSampler(list(range(rows)), mini_repeat_count=args.num_generations,
                            batch_size=args.generation_batch_size // args.num_generations,
                            repeat_count=args.num_iterations * args.steps_per_generation)
    batches = len(sampler) // (args.per_device_train_batch_size * args.steps_per_generation)
    len_dataloader = batches * args.steps_per_generation
    per_epoch = max(len_dataloader // args.gradient_accumulation_steps
                    + int(len_dataloader % args.gradient_accumulation_steps > 0), 1)
    trl_steps = math.ceil(args.num_train_epochs * per_epoch)
    t = sections_from_trl(args)
    ours = steps_of_epochs(t.epochs, rows, resolved(t.sections)["grpo"]["prompts_per_step"], args.num_iterations)
    assert ours * args.num_iterations == trl_steps


def test_max_steps_counts_optimizer_steps():
    assert sections_from_trl(config(max_steps=6, num_iterations=2)).sections["grpo"]["max_steps"] == 3
    with pytest.raises(UserError, match=r"max_steps: 5 is not a multiple of the optimizer steps per generation batch "
                                        r"\(2: num_iterations"):
        sections_from_trl(config(max_steps=5, num_iterations=2))


@pytest.mark.parametrize("kw, message", [
    ({"disable_dropout": True}, r"GRPOConfig: disable_dropout: = True is not supported: dropout is left as"),
    ({"steps_per_generation": 3, "gradient_accumulation_steps": 2},
     r"steps_per_generation: gives 3 micro-batches .* not a multiple of gradient_accumulation_steps \(2\)"),
    ({"label_smoothing_factor": 0.1}, r"label_smoothing_factor: = 0.1 is not supported \(a TrainingArguments"),
    ({"save_strategy": "epoch"}, r"save_strategy: = 'epoch' is not supported"),
    ({"model_init_kwargs": {"device_map": "auto"}}, r"model_init_kwargs.device_map: not supported"),
])
def test_a_field_we_cannot_honour_is_one_error_naming_it(kw, message):
    with pytest.raises(UserError, match=message) as info:
        sections_from_trl(config(**kw))
    assert len(str(info.value).splitlines()) == 1


def test_a_flat_dict_of_trl_keys_is_the_same_config():
    flat = {"output_dir": "out", "learning_rate": 0.1, "per_device_train_batch_size": 3, "num_generations": 3,
            "max_completion_length": 8, "report_to": "none", "use_cpu": True}
    assert sections_from_trl(flat).sections == sections_from_trl(config(**flat)).sections
    with pytest.raises(UserError, match="num_generation: not a field of trl.GRPOConfig; did you mean "
                                        "'num_generations'"):
        sections_from_trl({"num_generation": 3, "learning_rate": 0.1})


def test_grpo_trainer_runs_a_grpo_config(arithmetic_model_dir, tmp_path):
    """TRL's own quickstart shape: a GRPOConfig, plain-text prompts used as they are, num_train_epochs."""
    from grpo_core import GRPOTrainer

    rows = arithmetic_rows(40)[:5]
    args = config(output_dir=str(tmp_path / "run"), learning_rate=0.01, per_device_train_batch_size=4,
                  num_generations=2, max_completion_length=4, num_train_epochs=1, logging_steps=1,
                  model_init_kwargs={"dtype": "float32"}, disable_tqdm=True)
    seen = []

    def reward(completions, **kw):
        seen.append(list(kw["prompts"]))
        return [float(len(c)) for c in completions]

    trainer = GRPOTrainer(model=str(arithmetic_model_dir), reward_funcs=reward, args=args,
                          train_dataset=datasets.Dataset.from_list(rows))
    assert trainer.args is args
    cfg = trainer.cfg
    assert cfg.grpo.max_steps == 2 and cfg.grpo.prompts_per_step == 2  # 5 // 2 generation batches, one epoch
    assert cfg.data.chat_template is False and cfg.data.max_prompt_length is None
    assert cfg.model.dtype == "float32" and cfg.grpo.seed == 42
    trainer.train()
    assert seen and all(p in {r["prompt"] for r in rows} for p in seen[0])


def test_trls_loss_options_carry_over_under_the_same_names():
    options = {"loss_type": "vespo", "importance_sampling_level": "sequence", "off_policy_mask_threshold": 0.4,
               "use_bias_correction_kl": False, "sapo_temperature_neg": 1.2, "vespo_k_pos": 1.5,
               "vespo_lambda_neg": 1.7}
    grpo = sections_from_trl(config(**options)).sections["grpo"]
    assert {key: grpo[key] for key in options} == options


def test_trls_entropy_options_carry_over_under_the_same_names():
    options = {"top_entropy_quantile": 0.2, "entropy_coef": 0.01, "use_adaptive_entropy": True,
               "entropy_coef_min": 0.001, "entropy_coef_max": 0.5, "entropy_coef_delta": 0.002, "entropy_target": 0.6}
    grpo = sections_from_trl(config(**options)).sections["grpo"]
    assert {key: grpo[key] for key in options} == options
