"""The loss types and options TRL 1.16 has, through the run config and the whole trainer: each reaches the loss
the trainer computes (a one-step update per option on a tiny model), a micro-batch cut into row slices gives the
same loss at sequence level, and what TRL refuses or warns about is refused (one line naming the key) or warned
about. Equality with TRL's own loss code is ``tests/core/test_loss_parity.py``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from grpo_core.algorithm.loss import BUILTIN, grpo_loss  # noqa: E402
from grpo_core.algorithm.loss_cispo import CISPO  # noqa: E402
from grpo_core.algorithm.loss_luspo import LUSPO  # noqa: E402
from grpo_core.algorithm.loss_sapo import SAPO  # noqa: E402
from grpo_core.algorithm.loss_vespo import VESPO  # noqa: E402
from tests.core.conftest import tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir: Path) -> Path:
    return arithmetic_model_dir


def _config(model_dir: Path, tmp_path: Path, **grpo: Any) -> dict[str, Any]:
    data = tiny_run(model_dir, tmp_path / "run", model={"gradient_checkpointing": False},
                    data={"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
                    grpo={"learning_rate": 1e-3, "max_steps": 1, "num_iterations": 2, **grpo},
                    checkpoint={"every": 0}, rewards={"near": {"use": "numeric_proximity"}})
    return data


OPTIONS = [
    {"loss_type": "cispo", "epsilon_high": 1.1},
    {"loss_type": "sapo", "sapo_temperature_pos": 0.7, "sapo_temperature_neg": 1.4},
    {"loss_type": "luspo", "importance_sampling_level": "sequence"},
    {"loss_type": "vespo", "vespo_k_pos": 1.5, "vespo_lambda_neg": 1.5},
    {"loss_type": "grpo", "importance_sampling_level": "sequence", "off_policy_mask_threshold": 0.01},
    {"loss_type": "dapo", "beta": 0.04, "use_bias_correction_kl": False},
]


@pytest.mark.parametrize("grpo", OPTIONS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_each_loss_type_and_option_reaches_the_trainers_loss(model_dir: Path, tmp_path: Path, monkeypatch,
                                                             grpo: dict[str, Any]) -> None:
    import grpo_core.trainer as trainer_module
    from grpo_core import Trainer, config_from_dict

    calls: list[tuple[Any, dict[str, Any], float, dict[str, float]]] = []

    def spy(*args: Any, **kwargs: Any):
        loss, metrics = grpo_loss(*args, **kwargs)
        calls.append((kwargs["loss_type"], kwargs, float(loss.detach()), {k: float(v) for k, v in metrics.items()}))
        return loss, metrics

    monkeypatch.setattr(trainer_module, "grpo_loss", spy)
    trainer = Trainer(config_from_dict(_config(model_dir, tmp_path, **grpo)))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    summary = trainer.train()

    assert summary["step"] == 1 and math.isfinite(summary["loss"]) and len(calls) >= 2  # num_iterations = 2
    loss_type, kwargs, _, metrics = calls[-1]
    assert type(loss_type) is BUILTIN[grpo["loss_type"]] and loss_type.config is trainer.cfg
    for key in ("importance_sampling_level", "off_policy_mask_threshold"):
        assert kwargs[f"{key}"] == grpo.get(key, {"importance_sampling_level": "token"}.get(key))
    assert kwargs["kl_bias_correction"] == grpo.get("use_bias_correction_kl", True)
    for key in ("sapo_temperature_pos", "sapo_temperature_neg", "vespo_k_pos", "vespo_lambda_neg"):
        if key in grpo:
            assert loss_type.option(key, None) == grpo[key]
    if grpo["loss_type"] == "cispo":
        assert "cispo_clip_ratio" in metrics and "cispo_clip_ratio" in summary
    if grpo["loss_type"] == "vespo":
        assert "vespo/phi_seq_mean" in metrics
    if grpo.get("beta"):
        assert "kl" in metrics
    # the update happened: the second iteration's ratios are off 1, and the weights moved
    moved = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert moved


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"])
@pytest.mark.parametrize("level", ["token", "sequence"])
def test_row_slices_sum_to_the_micro_batch(loss_type: str, level: str) -> None:
    """The trainer's micro_batch_tokens budget cuts a micro-batch into row slices: at either level each slice's
    loss is its exact share, so the slices' losses and gradients sum to the whole micro-batch's."""
    g = torch.Generator().manual_seed(3)
    b, k = 6, 5
    logits = torch.randn(b, k, generator=g, requires_grad=True)
    mask = (torch.arange(k)[None] < torch.tensor([5, 2, 4, 1, 3, 5])[:, None]).float()
    old = logits.detach() + 0.4 * torch.randn(b, k, generator=g)
    advantages = torch.randn(b, generator=g)
    is_ratio = 0.8 + 0.4 * torch.rand(b, k, generator=g)
    common = dict(loss_type=BUILTIN[loss_type](), epsilon_high=1.2 if loss_type == "cispo" else 0.28, beta=0.04,
                  max_completion_length=k, num_items_in_batch=mask.sum() + 3, importance_sampling_level=level,
                  off_policy_mask_threshold=0.1, group_rows=b, group_tokens=mask.sum())
    ref = logits.detach() + 0.2 * torch.randn(b, k, generator=g)
    whole, _ = grpo_loss(logits, mask, advantages, old_per_token_logps=old, ref_per_token_logps=ref,
                         importance_sampling_ratio=is_ratio, **common)
    (grad_whole,) = torch.autograd.grad(whole, logits)
    parts = sum(grpo_loss(logits[rows], mask[rows], advantages[rows], old_per_token_logps=old[rows],
                          ref_per_token_logps=ref[rows], importance_sampling_ratio=is_ratio[rows], **common)[0]
                for rows in (slice(0, 2), slice(2, 5), slice(5, 6)))
    (grad_parts,) = torch.autograd.grad(parts, logits)
    torch.testing.assert_close(parts, whole, rtol=0, atol=1e-6)
    torch.testing.assert_close(grad_parts, grad_whole, rtol=0, atol=1e-6)
    assert whole.abs() > 1e-4


def _problems(core_registry: Any, **sections: Any) -> str:
    from grpo_core.config import config_from_dict
    from grpo_rewards.errors import ConfigError

    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "rewards": {"a": {"use": "core_len"}}}
    for name, values in sections.items():
        base[name] = values
    with pytest.raises(ConfigError) as info:
        config_from_dict(base, registry=core_registry)
    return str(info.value)


@pytest.mark.parametrize("loss_type,key,value,message", [
    ("cispo", "delta", 2.0, 'grpo.delta: does not apply to loss_type = "cispo"'),
    ("sapo", "delta", 2.0, 'grpo.delta: does not apply to loss_type = "sapo"'),
    ("sapo", "epsilon_high", 0.28, 'grpo.epsilon_high: does not apply to loss_type = "sapo"'),
    ("vespo", "delta", 2.0, 'grpo.delta: does not apply to loss_type = "vespo"'),
    ("vespo", "epsilon_high", 0.28, 'grpo.epsilon_high: does not apply to loss_type = "vespo"'),
])
def test_what_a_loss_type_ignores_is_refused_naming_the_key(core_registry: Any, loss_type: str, key: str,
                                                            value: float, message: str) -> None:
    assert message in _problems(core_registry, grpo={"loss_type": loss_type, key: value})


def test_vespo_with_vllm_refuses_a_sequence_level_correction_and_bad_option_values_are_refused(
        core_registry: Any) -> None:
    got = _problems(core_registry, grpo={"loss_type": "vespo"},
                    generation={"backend": "vllm", "importance_sampling": "sequence_mask"})
    assert 'generation.importance_sampling: loss_type = "vespo" folds the sampler\'s per-token ratios' in got
    got = _problems(core_registry, grpo={"importance_sampling_level": "sequences", "sapo_temperature_neg": 0,
                                         "off_policy_mask_threshold": -1})
    assert "grpo.importance_sampling_level: must be one of token, sequence, got 'sequences'" in got
    assert "grpo.sapo_temperature_neg:" in got and "grpo.off_policy_mask_threshold:" in got


@pytest.mark.parametrize("grpo,warned", [
    ({"loss_type": "luspo"}, 'loss_type = "luspo" is meant for importance_sampling_level = "sequence"'),
    ({"loss_type": "luspo", "importance_sampling_level": "sequence"}, None),
    ({"loss_type": "vespo", "importance_sampling_level": "sequence"}, '"vespo" computes its sequence-level weights'),
    ({"loss_type": "vespo"}, None),
    *[({"loss_type": lt, "importance_sampling_level": "sequence", "epsilon_high": 5.0},
       f'with loss_type = "{lt}": its normaliser sums') for lt in ("bnpo", "dr_grpo", "dapo", "cispo")],
    ({"loss_type": "cispo"}, 'grpo.epsilon_high = 0.2 with loss_type = "cispo": it is the clipped weight'),
    ({"loss_type": "cispo", "epsilon_high": 5.0}, None),
    ({"loss_type": "grpo", "importance_sampling_level": "sequence"}, None),
    ({"loss_type": "sapo", "importance_sampling_level": "sequence"}, None),
    ({"loss_type": "dapo"}, None),
])
def test_what_trl_warns_about_is_warned_before_the_run(core_registry: Any, grpo: dict[str, Any],
                                                      warned: str | None, capsys) -> None:
    from grpo_core.cli.checks import preflight
    from grpo_core.config import config_from_dict, loss_type_warnings

    cfg = config_from_dict({"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "grpo": grpo,
                            "rewards": {"a": {"use": "core_len"}}}, registry=core_registry)
    lines = loss_type_warnings(cfg, core_registry)
    if warned is None:
        assert lines == []
    else:
        assert len(lines) == 1 and warned in lines[0] and lines[0].startswith("<dict>: grpo.")
        preflight(cfg, run_folder=False, data=False)  # what grpo train and config validate run first
        assert f"warning: {lines[0]}" in capsys.readouterr().err


def test_the_new_loss_types_are_registered_as_any_plugins_are(core_registry: Any) -> None:
    for cls in (CISPO, SAPO, LUSPO, VESPO):
        assert core_registry.loss_types[cls.name] is cls
