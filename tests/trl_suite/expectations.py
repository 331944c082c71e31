"""Which of TRL's GRPOTrainer tests are skipped here, and which are expected to fail against this project's
trainer, each with its reason (``docs/trl.md`` lists them). A test is named by its function name, or by its name
with the parameters (``test_train_loss_types[False-cispo]``); expected failures are strict."""

from __future__ import annotations

import pytest

SKIPPED_CLASSES = {
    "TestGRPOTrainerVLM": "vision-language models: this project trains text models only",
    "TestGRPOTrainerSlow": "needs a GPU and downloads real models",
}

# tests that count the steps of TRL's default run length: never capped (conftest's MAX_STEPS)
FULL_LENGTH = {"test_prepare_input_called_with_correct_data"}

PRIVATE = "calls a private TRL helper or internal attribute"
ENTROPY = ("the entropy bonus's gradient is tested here through the trainer; the test calls TRL's private "
           "_get_per_token_logps_and_entropies and sets _entropy_bonus_enabled")
LIGER = "Liger kernels are not used here (use_liger_kernel is refused)"
EVAL_LOSS = ("TRL's evaluate() reports the GRPO loss of held-out groups (eval_loss); ours scores one greedy "
             "completion per row with the rewards (eval_reward, eval_rewards/<name>/mean)")
TRL_TOO = "fails against trl 1.16's own GRPOTrainer too: "

# test name -> reason it fails against grpo_core.GRPOTrainer
EXPECTED_FAILURES: dict[str, str] = {
    "test_compute_entropy_mask_0": f"{PRIVATE} (get_high_entropy_mask; the same mask is grpo_core.algorithm.entropy, tested against it)",
    "test_compute_entropy_mask_1": f"{PRIVATE} (get_high_entropy_mask; the same mask is grpo_core.algorithm.entropy, tested against it)",
    "test_compute_entropy_mask_lower_threshold": f"{PRIVATE} (get_high_entropy_mask; the same mask is grpo_core.algorithm.entropy, tested against it)",
    "test_compute_entropy_threshold_0": f"{PRIVATE} (get_high_entropy_mask; the same mask is grpo_core.algorithm.entropy, tested against it)",
    "test_compute_entropy_threshold_1": f"{PRIVATE} (get_high_entropy_mask; the same mask is grpo_core.algorithm.entropy, tested against it)",
    "test_compute_entropy_all_masked": f"{PRIVATE} (get_high_entropy_mask; the same mask is grpo_core.algorithm.entropy, tested against it)",
    "test_generate_prefers_rollout_func": f"{PRIVATE} (rollout_func, _generate); " + TRL_TOO + "no eos_token_ids",
    "test_generate_rollout_func_syncs_vllm_weights_when_needed": f"{PRIVATE} (rollout_func, vllm_generation)",
    "test_generate_rollout_func_raises_when_required_keys_are_missing": f"{PRIVATE} (rollout_func, _generate)",
    "test_entropy_bonus_flows_gradients": ENTROPY,
    "test_train_with_sync_ref_model": "sync_ref_model trains here; the test reads TRL's trainer.ref_model "
                                      "attribute, which this trainer does not expose",
    "test_evaluate_with_eval_dataset": EVAL_LOSS,
    "test_liger_kernel_with_peft_lm_head_raises": LIGER,
    "test_liger_kernel_with_peft_non_lm_head_target_allowed": LIGER,
    "test_liger_kernel_with_peft_modules_to_save_lm_head_allowed": LIGER,
    "test_liger_kernel_with_peft_prompt_learning_raises": LIGER,
    "test_iterable_eval_keeps_map_style_train_workers": "transformers' dataloaders (get_train_dataloader, "
                                                        "get_eval_dataloader): rows are read without them here",
    "test_train_reward_func_with_log_extra": f"{PRIVATE} (_logs); log_extra's numbers are logged as "
                                             "rewards/<reward>/extra/<column>",
    "test_train_reward_func_with_log_metric": "log_metric(name) is logged per reward as rewards/<reward>/<name>, "
                                              "not under TRL's bare name",
    "test_train_with_additional_generation_kwargs": "min_p: the transformers backend does not apply it (vLLM "
                                                    "only)",
    "test_warning_raised_all_rewards_none": "the warning says the same in this project's words (rows, not "
                                            "TRL's kwargs dump)",
    "test_prepare_input_called_with_correct_data": f"{PRIVATE} (training_step); steps_per_generation != "
                                                   "gradient_accumulation_steps is refused",
    "test_train_with_mask_truncated_completions": "mocks transformers' generate(); this trainer samples groups "
                                                  "with its own decode loop, so the mock never runs",
}


def mark_for(name: str, cls: str, trainer: str) -> pytest.MarkDecorator | None:
    if cls in SKIPPED_CLASSES:
        return pytest.mark.skip(reason=SKIPPED_CLASSES[cls])
    if trainer != "ours":
        return None
    reason = EXPECTED_FAILURES.get(name) or EXPECTED_FAILURES.get(name.split("[")[0])
    return pytest.mark.xfail(reason=reason, strict=True) if reason else None
