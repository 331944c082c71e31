"""Rewards that run a model: the ``reward_model`` built-in, in the model's own process (:mod:`.model_process`),
and the local transformers judge of ``llm_judge``, in the training process (registered by
:mod:`grpo_core.plugin`; their modules import torch when first used)."""
