"""``[grpo] steps_per_generation``: a generation batch generated once and split over several optimizer steps
(TRL's ``steps_per_generation``, distinct from ``num_iterations``). Through the whole trainer: the generate
calls and optimizer steps are counted; each optimizer step's gradient is TRL 1.16's own ``_compute_loss`` on
that step's slice (its ``num_items_in_batch`` rescaled as TRL rescales it), with the old log-probs computed
once before the first step, the second step running on a policy that has moved away from them."""

from __future__ import annotations

import copy
import re

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from grpo_core.policy.logprobs import completion_logprobs  # noqa: E402

# the tests wrap optimizer.step to record gradients; the scheduler notices and warns
pytestmark = pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")


def _config(model_dir, tmp_path, **grpo):
    from grpo_core import config_from_dict

    return config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 4, "max_completion_length": 6},
        "grpo": {"learning_rate": 1e-2, "prompts_per_step": 2, "max_steps": 1, "max_grad_norm": 1e9, **grpo},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "checkpoint": {"every_minutes": 0},
        "rewards": {"correct": {"use": "exact_match"}},
    })


def test_one_generation_per_k_optimizer_steps(arithmetic_model_dir, tmp_path):
    from grpo_core import Trainer

    trainer = Trainer(_config(arithmetic_model_dir, tmp_path, steps_per_generation=2, num_iterations=2, max_steps=2))
    assert trainer.cfg.optimizer_steps_per_step == 4  # 2 slices x 2 iterations
    calls = {"generate": 0, "optimizer": 0, "old": []}
    generate, step, fixed = trainer.backend.generate, trainer.engine.optimizer_step, trainer._fixed_logps

    def counting_generate(*args, **kwargs):
        calls["generate"] += 1
        return generate(*args, **kwargs)

    def counting_step():
        calls["optimizer"] += 1
        return step()

    def recording_fixed(plans, need_old, need_ref):
        calls["old"].append((len(plans), need_old))
        return fixed(plans, need_old, need_ref)

    trainer.backend.generate, trainer.engine.optimizer_step = counting_generate, counting_step
    trainer._fixed_logps = recording_fixed
    summary = trainer.train()
    assert summary["step"] == 2
    assert calls["generate"] == 2  # one generation batch per loop step
    assert calls["optimizer"] == 8  # 2 loop steps x 2 slices x 2 iterations
    assert trainer.scheduler.last_epoch == 8  # the schedule counts optimizer steps
    assert trainer.optimizer.state[trainer.params[0]]["step"] == 8
    assert calls["old"] == [(2, True), (2, True)]  # old log-probs once per generation batch, as TRL


def test_unset_is_one_step_per_generation_and_needs_no_old_pass(arithmetic_model_dir, tmp_path):
    from grpo_core import Trainer

    trainer = Trainer(_config(arithmetic_model_dir, tmp_path, gradient_accumulation_steps=2))
    assert trainer.cfg.optimizer_steps_per_step == 1
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 4)
    seen = []
    fixed = trainer._fixed_logps
    trainer._fixed_logps = lambda plans, need_old, need_ref: (seen.append((len(plans), need_old)),
                                                              fixed(plans, need_old, need_ref))[1]
    trainer._update(batch, torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.4]))
    assert seen == [(1, False)]


def _trl(model_dir, tmp_path, loss_type):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=4, num_generations=4,
                      steps_per_generation=2, gradient_accumulation_steps=1, use_cpu=True, report_to=[], bf16=False,
                      fp16=False, loss_type=loss_type, beta=0.0, epsilon=0.05, max_completion_length=6,
                      gradient_checkpointing=False)
    assert args.generation_batch_size == 8  # TRL's arithmetic: one generation batch of 8 for 2 optimizer steps
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                          args=args, train_dataset=Dataset.from_dict({"prompt": ["1+2=", "3+4="]}))
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop in a real run
    trainer.model.train()
    return trainer


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_each_optimizer_step_is_trls_update_on_its_slice(arithmetic_model_dir, tmp_path, loss_type):
    from grpo_core import Trainer

    ours = Trainer(_config(arithmetic_model_dir, tmp_path, steps_per_generation=2, loss_type=loss_type,
                           epsilon=0.05))
    theirs = _trl(arithmetic_model_dir, tmp_path, loss_type)
    start = copy.deepcopy(ours.model).eval()
    torch.manual_seed(0)
    batch = ours.backend.generate([ours.prompts[0], ours.prompts[1]], 4)
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.4])
    input_ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    attention_mask = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    k = batch.completion_ids.size(1)
    with torch.no_grad():  # the policy before the first step, as TRL computes it at generation time
        old, _ = completion_logprobs(start, input_ids, attention_mask, k, temperature=1.0)

    steps = []  # per optimizer step: the gradients it applies and the weights it applies them to
    real_step = ours.optimizer.step

    def recording_step(*args, **kwargs):
        steps.append(({n: p.grad.clone() for n, p in ours.model.named_parameters() if p.grad is not None},
                       {n: t.clone() for n, t in ours.model.state_dict().items()}))
        return real_step(*args, **kwargs)

    ours.optimizer.step = recording_step
    stats = ours._update(batch, advantages)
    assert len(steps) == 2
    assert stats["clip_ratio/region_mean"] > 0  # the second step ran against the old log-probs, ratios != 1

    num_items = batch.completion_mask.sum()  # the whole generation batch's, as TRL passes it
    for s, (grads, weights) in enumerate(steps):
        rows = slice(4 * s, 4 * s + 4)
        theirs.model.load_state_dict(weights)  # TRL's policy where ours was at this step
        theirs.model.zero_grad()
        inputs = {"prompt_ids": batch.prompt_ids[rows], "prompt_mask": batch.prompt_mask[rows],
                  "completion_ids": batch.completion_ids[rows], "completion_mask": batch.completion_mask[rows],
                  "advantages": advantages[rows], "num_items_in_batch": num_items,
                  "old_per_token_logps": old[rows]}
        theirs._compute_loss(theirs.model, inputs).backward()
        compared = 0
        for name, p in theirs.model.named_parameters():
            torch.testing.assert_close(grads[name], p.grad, rtol=0, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
            compared += int(p.grad.abs().sum() > 0)
        assert compared >= len(grads) // 2
    assert any(not torch.equal(steps[0][1][n], steps[1][1][n]) for n in steps[0][1])  # the policy moved


@pytest.mark.parametrize(("grpo", "message"), [
    ({"gradient_accumulation_steps": 2, "steps_per_generation": 3}, "must be a multiple of gradient_accumulation"),
    ({"steps_per_generation": 3}, "must divide prompts_per_step * num_generations = 8"),
])
def test_a_split_that_is_not_whole_optimizer_steps_is_refused(arithmetic_model_dir, tmp_path, grpo, message):
    from grpo_rewards.tomlfile import ConfigError

    with pytest.raises(ConfigError, match=re.escape("grpo.steps_per_generation: " + message)):
        _config(arithmetic_model_dir, tmp_path, **grpo)


def test_trls_batch_arithmetic_both_ways(arithmetic_model_dir, tmp_path):
    """Our config as TRL's GRPOConfig arguments, and that GRPOConfig back: the same generation batch, split the
    same way, TRL counting optimizer steps."""
    from trl import GRPOConfig

    from grpo_core.trainer_backends.trl_mapping import grpo_config_kwargs
    from grpo_core.trl_args import sections_from_trl

    cfg = _config(arithmetic_model_dir, tmp_path, gradient_accumulation_steps=2, steps_per_generation=4,
                  num_iterations=2, max_steps=3)
    args = GRPOConfig(**{**grpo_config_kwargs(cfg), "output_dir": str(tmp_path / "trl"), "use_cpu": True})
    assert (args.generation_batch_size, args.steps_per_generation, args.per_device_train_batch_size) == (8, 4, 2)
    assert args.max_steps == 3 * 2 * 2  # loop steps x iterations x optimizer steps per generation batch
    batch_keys = ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
                  "num_generations", "num_iterations", "max_steps")
    back = sections_from_trl(GRPOConfig(output_dir=str(tmp_path / "trl"), use_cpu=True,
                                        **{key: getattr(args, key) for key in batch_keys})).sections["grpo"]
    assert (back["prompts_per_step"], back["steps_per_generation"], back["gradient_accumulation_steps"],
            back["max_steps"]) == (2, 4, 2, 3)
