"""Parity with TRL: our ``grpo_loss`` (fed by ``completion_logprobs``) gives the same loss and
gradients as ``trl.GRPOTrainer._compute_loss`` on a real, minimal GRPOTrainer (fp32, tol 1e-5),
for every loss_type x beta {0, 0.04} x mu {1, 2} (mu 2: precomputed old log-probs), with a
sampling temperature, asymmetric clipping and gradient accumulation; and for every loss type TRL 1.16 has x
importance-sampling level (token, sequence), with perturbed old log-probs, the off-policy sequence mask, the KL
with and without its bias correction, and VESPO's sampler ratio, each case asserting that its clipping, mask or
weighting was exercised."""

from __future__ import annotations

import itertools
import zlib

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from grpo_core.algorithm.loss import grpo_loss  # noqa: E402
from grpo_core.policy.logprobs import completion_logprobs  # noqa: E402

TEMPERATURE = 0.7
EPSILON, EPSILON_HIGH = 0.2, 0.28
MAX_COMPLETION = 6
GRAD_ACCUM = 2


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = ["<pad>", "<eos>", *"0123456789+-= abcdefgh"]
    tk = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")
    cfg = LlamaConfig(
        vocab_size=len(chars), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=1, bos_token_id=1,
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _trl_trainer(path, tmp_path, loss_type, beta, mu, delta, epsilon_high=EPSILON_HIGH, **options):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, use_cpu=True,
        report_to=[], bf16=False, fp16=False, loss_type=loss_type, beta=beta, num_iterations=mu,
        epsilon=EPSILON, epsilon_high=epsilon_high, delta=delta, temperature=TEMPERATURE,
        max_completion_length=MAX_COMPLETION, gradient_accumulation_steps=GRAD_ACCUM,
        gradient_checkpointing=False, **options,
    )
    trainer = GRPOTrainer(
        model=path, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], args=args,
        train_dataset=Dataset.from_dict({"prompt": ["1+2=", "3+4="]}),
    )
    trainer.current_gradient_accumulation_steps = GRAD_ACCUM  # set by Trainer's loop in a real run
    trainer.model.train()
    return trainer


def _batch(vocab: int, generator: torch.Generator):
    b, p, k = 4, 5, MAX_COMPLETION
    prompt_ids = torch.randint(2, vocab, (b, p), generator=generator)
    prompt_mask = torch.ones(b, p, dtype=torch.long)
    prompt_mask[0, :2] = 0  # left padding
    prompt_mask[2, :1] = 0
    prompt_ids[prompt_mask == 0] = 0
    completion_ids = torch.randint(2, vocab, (b, k), generator=generator)
    lengths = torch.tensor([6, 3, 4, 1])
    completion_mask = (torch.arange(k)[None] < lengths[:, None]).long()
    completion_ids[completion_mask == 0] = 0
    advantages = torch.tensor([1.3, -0.7, 0.4, -1.1])
    return prompt_ids, prompt_mask, completion_ids, completion_mask, advantages


def _trl_loss(trainer, prompt_ids, prompt_mask, completion_ids, completion_mask, advantages, num_items, **extra):
    """TRL's loss of the batch (its gradients accumulated in ``trainer.model``); ``extra`` inputs given as None are
    left out, as TRL's batches leave them out."""
    inputs = {
        "prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
        "completion_mask": completion_mask, "advantages": advantages, "num_items_in_batch": num_items,
        **{key: value for key, value in extra.items() if value is not None},
    }
    trl_loss = trainer._compute_loss(trainer.model, inputs)
    trl_loss.backward()
    return trl_loss


def _assert_same_update(loss, trl_loss, ours, trainer) -> None:
    """The same loss and the same gradient on every parameter (fp32, 1e-5), and a non-degenerate one."""
    torch.testing.assert_close(loss, trl_loss.detach(), rtol=0, atol=1e-5)
    assert loss.abs().item() > 1e-4  # a real, non-degenerate loss
    theirs = dict(trainer.model.named_parameters())
    compared = 0
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, theirs[name].grad, rtol=0, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")
        compared += int(p.grad.abs().sum() > 0)
    assert compared >= len(theirs) // 2


CASES = [
    (lt, beta, mu, delta)
    for lt, beta, mu in itertools.product(("grpo", "bnpo", "dr_grpo", "dapo"), (0.0, 0.04), (1, 2))
    for delta in ((None, 1.25) if mu == 2 and beta == 0.04 else (None,))
]


@pytest.mark.parametrize("loss_type,beta,mu,delta", CASES)
def test_loss_and_grads_match_trl(tiny_model_dir, tmp_path, loss_type, beta, mu, delta):
    from transformers import AutoModelForCausalLM

    trainer = _trl_trainer(tiny_model_dir, tmp_path, loss_type, beta, mu, delta)
    ours = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ours.train()
    assert trainer.loss_type == loss_type and trainer.beta == beta

    g = torch.Generator().manual_seed(zlib.crc32(f"{loss_type}-{beta}-{mu}".encode()) % 1000)  # not hash(): salted
    prompt_ids, prompt_mask, completion_ids, completion_mask, advantages = _batch(ours.config.vocab_size, g)
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)
    k = completion_ids.size(1)
    with torch.no_grad():
        base, _ = completion_logprobs(ours, input_ids, attention_mask, k, temperature=TEMPERATURE)
    # old / reference log-probs as a policy a few updates away would give them: ratios around 1, some clipped
    old = base + 0.5 * torch.randn(base.shape, generator=g) if mu > 1 else None
    ref = base + 0.5 * torch.randn(base.shape, generator=g) if beta else None
    num_items = completion_mask.sum() + 7  # the whole generation batch (two micro-batches here)

    trl_loss = _trl_loss(trainer, prompt_ids, prompt_mask, completion_ids, completion_mask, advantages, num_items,
                         old_per_token_logps=old, ref_per_token_logps=ref)

    logps, _ = completion_logprobs(ours, input_ids, attention_mask, k, temperature=TEMPERATURE)
    loss, metrics = grpo_loss(
        logps, completion_mask, advantages, old_per_token_logps=old, ref_per_token_logps=ref,
        loss_type=loss_type, epsilon=EPSILON, epsilon_high=EPSILON_HIGH, delta=delta, beta=beta,
        max_completion_length=MAX_COMPLETION, num_items_in_batch=num_items, grad_accum_steps=GRAD_ACCUM,
    )
    loss.backward()

    _assert_same_update(loss, trl_loss, ours, trainer)
    if beta:
        assert abs(metrics["kl"].item() - trainer._metrics["train"]["kl"][-1]) < 1e-5
    for key in ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"):
        assert abs(metrics[key].item() - trainer._metrics["train"][key][-1]) < 1e-6
    if mu > 1 and delta is None:
        assert metrics["clip_ratio/region_mean"].item() > 0  # the clipping branch was exercised


# (loss type, importance-sampling level, beta, off-policy mask threshold, KL bias correction): every loss type TRL
# 1.16 has at both levels; the mask, the KL and its correction spread over them so that each appears at both levels
NEWER = [
    (lt, level, beta, mask, bias)
    for i, lt in enumerate(("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"))
    for j, level in enumerate(("token", "sequence"))
    for beta, mask, bias in [((0.04, None, True), (0.0, 0.05, True), (0.04, 0.05, False))[(i + j) % 3]]
]
CISPO_EPSILON_HIGH = 1.3  # ScaleRL's epsilon_max (5 recommended); low enough here that some tokens are clipped
SAPO = {"sapo_temperature_pos": 0.8, "sapo_temperature_neg": 1.3}  # not TRL's defaults: the keys must reach both
VESPO = {"vespo_k_pos": 1.5, "vespo_lambda_pos": 2.5, "vespo_k_neg": 2.5, "vespo_lambda_neg": 1.5}


class _Options:
    """The [grpo] keys a loss type reads (LossType.option), as a run config would give them."""

    def __init__(self, **keys):
        self.grpo = type("Grpo", (), keys)()


@pytest.mark.parametrize("loss_type,level,beta,mask_threshold,bias_correction", NEWER)
def test_every_trl_loss_type_and_level_matches_trl(tiny_model_dir, tmp_path, loss_type, level, beta,
                                                   mask_threshold, bias_correction):
    from transformers import AutoModelForCausalLM

    from grpo_core.algorithm.loss import BUILTIN

    epsilon_high = CISPO_EPSILON_HIGH if loss_type == "cispo" else EPSILON_HIGH
    options = {**(SAPO if loss_type == "sapo" else {}), **(VESPO if loss_type == "vespo" else {})}
    trainer = _trl_trainer(tiny_model_dir, tmp_path, loss_type, beta, 2, None, epsilon_high=epsilon_high,
                           importance_sampling_level=level, off_policy_mask_threshold=mask_threshold,
                           use_bias_correction_kl=bias_correction, **options)
    ours = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ours.train()
    assert (trainer.loss_type, trainer.importance_sampling_level) == (loss_type, level)

    g = torch.Generator().manual_seed(zlib.crc32(f"{loss_type}-{level}".encode()) % 1000)
    prompt_ids, prompt_mask, completion_ids, completion_mask, advantages = _batch(ours.config.vocab_size, g)
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)
    k = completion_ids.size(1)
    with torch.no_grad():
        base, _ = completion_logprobs(ours, input_ids, attention_mask, k, temperature=TEMPERATURE)
    # a policy a few updates away: token noise around a shift per sequence that, with the advantages
    # [1.3, -0.7, 0.4, -1.1], clips row 0 high and row 1 low at either level (row 0 past cispo's 1.3 too), leaves
    # row 2 inside, and puts row 1 (not row 3) past the off-policy mask's threshold
    shift = torch.tensor([[-0.6], [0.6], [-0.1], [-0.3]])
    old = base + shift + 0.3 * torch.randn(base.shape, generator=g)
    ref = base + 0.5 * torch.randn(base.shape, generator=g) if beta else None
    # VESPO folds the sampler's ratio into its weight (TRL reads it from the inputs whatever the sampler)
    is_ratio = (0.8 + 0.4 * torch.rand(base.shape, generator=g)) if loss_type == "vespo" else None
    num_items = completion_mask.sum() + 7
    trl_loss = _trl_loss(trainer, prompt_ids, prompt_mask, completion_ids, completion_mask, advantages, num_items,
                         old_per_token_logps=old, ref_per_token_logps=ref, importance_sampling_ratio=is_ratio)

    logps, _ = completion_logprobs(ours, input_ids, attention_mask, k, temperature=TEMPERATURE)
    loss, metrics = grpo_loss(
        logps, completion_mask, advantages, old_per_token_logps=old, ref_per_token_logps=ref,
        loss_type=BUILTIN[loss_type](_Options(**options)), epsilon=EPSILON, epsilon_high=epsilon_high, beta=beta,
        max_completion_length=MAX_COMPLETION, num_items_in_batch=num_items, grad_accum_steps=GRAD_ACCUM,
        importance_sampling_ratio=is_ratio, importance_sampling_level=level,
        off_policy_mask_threshold=mask_threshold, kl_bias_correction=bias_correction,
    )
    loss.backward()

    _assert_same_update(loss, trl_loss, ours, trainer)
    logged = trainer._metrics["train"]
    if beta:
        assert abs(metrics["kl"].item() - logged["kl"][-1]) < 1e-5
    shared = {key for key in metrics if key in logged and key not in ("kl", "loss", "policy_loss", "entropy")}
    for key in shared:
        assert abs(metrics[key].item() - logged[key][-1]) < 1e-6, key
    # what each case exercises, asserted: its clipping, its weighting, its mask
    if loss_type in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo"):
        assert shared >= {"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}
        assert metrics["clip_ratio/region_mean"].item() > 0
    elif loss_type == "cispo":
        assert shared == {"cispo_clip_ratio"} and 0 < metrics["cispo_clip_ratio"].item() < 1
    elif loss_type == "vespo":
        assert shared == {"vespo/phi_seq_mean"} and abs(metrics["vespo/phi_seq_mean"].item() - 1) > 1e-3
    else:  # sapo: the soft gate's weight is not 1 where the ratio is not 1 (no clipping to count)
        assert shared == set()
    if mask_threshold is not None:
        from grpo_core.algorithm.loss import off_policy_mask

        kept = off_policy_mask(advantages.unsqueeze(1), logps.detach(), old, completion_mask.float(), mask_threshold)
        assert 0 < kept.sum().item() < kept.numel()  # some sequence was masked, not all
