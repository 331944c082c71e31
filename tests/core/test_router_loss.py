"""``[grpo] router_aux_loss_coef`` (TRL's name): a Mixture-of-Experts model's load-balancing loss in the update.

Through the whole trainer on a tiny Mixtral (4 experts, top 2): one optimizer step's gradient is TRL 1.16's own
``_compute_loss`` on each micro-batch, load-balancing term included, and the term moves that gradient; each
micro-batch run as one forward or as row slices (exactly the same update: the loss is not a sum over rows); the
logged ``aux_loss`` is TRL's. Unset, the model config's own coefficient applies (TRL's rule). A non-zero value on a
dense model is refused, one line naming the key, where TRL raises; a dense model's update asks for no router logits.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from tests.core.test_distributed import save_tiny_mixtral  # noqa: E402  (the same tiny MoE model)

# the tests wrap optimizer.step to record gradients; the scheduler notices and warns
pytestmark = pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")

ADVANTAGES = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.4])


@pytest.fixture(scope="module")
def moe_model_dir(tmp_path_factory, arithmetic_model_dir):
    return save_tiny_mixtral(arithmetic_model_dir, tmp_path_factory.mktemp("moe"))


def _ours(model_dir, tmp_path, coef, **grpo):
    from grpo_core import Trainer, config_from_dict

    return Trainer(config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 4, "max_completion_length": 6},
        "grpo": {"learning_rate": 1e-2, "prompts_per_step": 2, "max_steps": 1, "max_grad_norm": 1e9,
                 "router_aux_loss_coef": coef, **grpo},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"correct": {"use": "exact_match"}},
    }))


def _trl(model_dir, tmp_path, coef, **options):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=4, num_generations=4,
                      use_cpu=True, report_to=[], bf16=False, fp16=False, beta=0.0, max_completion_length=6,
                      gradient_checkpointing=False, router_aux_loss_coef=coef, **options)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                          args=args, train_dataset=Dataset.from_dict({"prompt": ["1+2=", "3+4="]}))
    trainer.current_gradient_accumulation_steps = args.gradient_accumulation_steps  # set by Trainer's loop
    trainer.model.train()
    return trainer


def test_a_dense_model_is_refused_where_trl_raises(arithmetic_model_dir, tmp_path):
    from grpo_rewards.errors import ConfigError

    with pytest.raises(ValueError, match="is not a Mixture-of-Experts model"):
        _trl(arithmetic_model_dir, tmp_path, 0.01)
    with pytest.raises(ConfigError, match=r"grpo\.router_aux_loss_coef: is 0\.01 but \w+ is not a "
                                          r"Mixture-of-Experts model") as info:
        _ours(arithmetic_model_dir, tmp_path, 0.01)
    assert len(str(info.value).splitlines()) == 1


def test_unset_is_the_model_configs_own_coefficient_as_in_trl(moe_model_dir, tmp_path):
    theirs, ours = _trl(moe_model_dir, tmp_path, None), _ours(moe_model_dir, tmp_path, None)
    assert theirs.aux_loss_enabled and ours.router.enabled
    assert ours.router.coef == theirs.router_aux_loss_coef == 0.001  # MixtralConfig's default
    assert not _trl(moe_model_dir, tmp_path, 0.0).aux_loss_enabled
    assert not _ours(moe_model_dir, tmp_path, 0.0).router.enabled


def test_a_dense_models_update_asks_for_no_router_logits(arithmetic_model_dir, tmp_path):
    ours = _ours(arithmetic_model_dir, tmp_path, None)
    assert not ours.router.enabled
    seen = []
    forward = ours.engine.forward
    ours.engine.forward = lambda *args, **kwargs: (seen.append(kwargs), forward(*args, **kwargs))[1]
    torch.manual_seed(0)
    ours._update(ours.backend.generate([ours.prompts[0], ours.prompts[1]], 4), ADVANTAGES)
    assert seen and not any("router_logits" in kwargs for kwargs in seen)


def _recorded_update(ours, batch):
    """Our one optimizer step on ``batch``: its metrics and the gradient it applied."""
    grads = []
    real_step = ours.optimizer.step

    def recording_step(*args, **kwargs):
        grads.append({n: p.grad.clone() for n, p in ours.model.named_parameters() if p.grad is not None})
        return real_step(*args, **kwargs)

    ours.optimizer.step = recording_step
    stats = ours._update(batch, ADVANTAGES)
    assert len(grads) == 1
    return stats, grads[0]


def _trl_gradient(theirs, batch, aux: bool):
    """TRL's gradient over the batch's two micro-batches of 4 rows (its accumulation), with or without the term."""
    theirs.aux_loss_enabled = aux
    theirs.model.zero_grad()
    num_items = batch.completion_mask.sum()
    for rows in (slice(0, 4), slice(4, 8)):
        inputs = {"prompt_ids": batch.prompt_ids[rows], "prompt_mask": batch.prompt_mask[rows],
                  "completion_ids": batch.completion_ids[rows], "completion_mask": batch.completion_mask[rows],
                  "advantages": ADVANTAGES[rows], "num_items_in_batch": num_items}
        theirs._compute_loss(theirs.model, inputs).backward()
    return {n: p.grad.clone() for n, p in theirs.model.named_parameters()}


@pytest.mark.parametrize(("loss_type", "level", "micro_batch_tokens"), [
    ("grpo", "token", 4096),  # each micro-batch one forward
    ("dapo", "token", 20),  # each micro-batch in slices of 1-2 rows
    ("grpo", "sequence", 30),
])
def test_one_update_is_trls_loss_with_its_load_balancing_term(moe_model_dir, tmp_path, loss_type, level,
                                                              micro_batch_tokens):
    coef = 0.5
    ours = _ours(moe_model_dir, tmp_path, coef, loss_type=loss_type, importance_sampling_level=level,
                 gradient_accumulation_steps=2, micro_batch_tokens=micro_batch_tokens)
    theirs = _trl(moe_model_dir, tmp_path, coef, loss_type=loss_type, importance_sampling_level=level,
                  gradient_accumulation_steps=2)
    theirs.model.load_state_dict(ours.model.state_dict())
    torch.manual_seed(0)
    batch = ours.backend.generate([ours.prompts[0], ours.prompts[1]], 4)
    rows_per_slice = [len(part) for parts in ours._plans(batch)[0].slices for part in parts]
    assert (max(rows_per_slice) == 4) == (micro_batch_tokens == 4096)  # sliced where the budget says so

    stats, grads = _recorded_update(ours, batch)
    with_aux = _trl_gradient(theirs, batch, aux=True)
    logged = theirs._metrics["train"]["aux_loss"]
    assert len(logged) == 2 and min(logged) > 0  # a real load-balancing loss on each micro-batch
    assert stats["aux_loss"] == pytest.approx(sum(logged) / 2, abs=1e-6)
    worst, compared = 0.0, 0
    for name, g in with_aux.items():
        torch.testing.assert_close(grads[name], g, rtol=0, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
        worst = max(worst, (grads[name] - g).abs().max().item())
        compared += int(g.abs().sum() > 0)
    assert compared >= len(with_aux) // 2
    print(f"{loss_type}-{level}-{micro_batch_tokens}: largest gradient difference from TRL {worst:.3g}")

    without = _trl_gradient(theirs, batch, aux=False)  # the term moves the gradient, the routers' above all
    moved = max((with_aux[n] - without[n]).abs().max().item() for n in with_aux if "gate" in n)
    assert moved > 1e-3


def test_the_trl_backend_maps_the_key_one_to_one(moe_model_dir, tmp_path):
    from trl import GRPOConfig

    from grpo_core import config_from_dict
    from grpo_core.trainer_backends.trl_mapping import grpo_config_kwargs
    from grpo_core.trl_args import sections_from_trl

    run = {"model": {"name_or_path": str(moe_model_dir)}, "data": {"source": "demo:arithmetic"},
           "generation": {"max_completion_length": 8}, "rewards": {"correct": {"use": "exact_match"}}}
    assert grpo_config_kwargs(config_from_dict({**run, "grpo": {"router_aux_loss_coef": 0.02}}))[
        "router_aux_loss_coef"] == 0.02
    assert grpo_config_kwargs(config_from_dict(run))["router_aux_loss_coef"] is None  # TRL's unset: the model's own
    back = sections_from_trl(GRPOConfig(output_dir=str(tmp_path), use_cpu=True, router_aux_loss_coef=0.03))
    assert back.sections["grpo"]["router_aux_loss_coef"] == 0.03


FAMILIES = {  # name: (config class, model class, the config's MoE keys)
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
                   "shared_expert_intermediate_size": 8}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", {"num_experts": 4, "num_experts_per_tok": 3}),
}


def _tiny(config_name, model_name, moe):
    import transformers

    torch.manual_seed(0)
    config = getattr(transformers, config_name)(vocab_size=40, hidden_size=16, intermediate_size=32,
                                                 num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                                 max_position_embeddings=64, pad_token_id=0, eos_token_id=1,
                                                 bos_token_id=1, **moe)
    return getattr(transformers, model_name)(config)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_familys_loss_is_its_own_forwards_aux_loss(family):
    """The loss from the chunked forward's router logits equals the ``aux_loss`` the model's own forward returns."""
    from types import SimpleNamespace

    from grpo_core.policy.logprobs import completion_logprobs
    from grpo_core.policy.router_loss import RouterLoss

    model = _tiny(*FAMILIES[family])
    cfg = SimpleNamespace(grpo=SimpleNamespace(router_aux_loss_coef=0.1, gradient_accumulation_steps=1))
    router = RouterLoss.of(model, cfg)
    assert router.enabled
    ids = torch.randint(2, 40, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # left padding, out of the loss
    _, _, routed = completion_logprobs(model, ids, mask, 4, router_logits=True)
    theirs = model(input_ids=ids, attention_mask=mask, output_router_logits=True).aux_loss
    torch.testing.assert_close(router.value(routed, mask), theirs, rtol=0, atol=1e-6)
    assert abs(router.value(routed, torch.ones_like(mask)).item() - theirs.item()) > 1e-6  # the mask counts


def test_a_family_whose_loss_takes_other_arguments_is_refused():
    from types import SimpleNamespace

    from grpo_core.policy.router_loss import router_loss_problem

    doge = _tiny("DogeConfig", "DogeForCausalLM", {"is_moe": True, "num_experts": 4, "num_experts_per_tok": 2})
    cfg = SimpleNamespace(grpo=SimpleNamespace(router_aux_loss_coef=0.1), trainer=SimpleNamespace(backend="grpo_core"))
    problem = router_loss_problem(cfg, doge)
    assert problem.startswith("grpo.router_aux_loss_coef: DogeForCausalLM's load-balancing loss is not")
    assert "\n" not in problem
    cfg.trainer.backend = "trl"  # TRL's forward adds it there
    assert router_loss_problem(cfg, doge) is None
