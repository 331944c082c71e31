"""Rewards that run a model in the training process: the ``reward_model`` built-in and the local transformers
judge of ``llm_judge`` (registered by :mod:`grpo_core.plugin`; their modules import torch when first used)."""
