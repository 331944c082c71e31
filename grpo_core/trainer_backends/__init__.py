"""Trainer backends other than the built-in loop: each runs a validated run config with another trainer.

``trl_mapping``  our run config in ``trl.GRPOConfig``'s terms, the keys TRL has no equivalent for, and
                 TRL's metric names in ours (no torch or TRL import);
``trl_backend``  runs ``trl.GRPOTrainer`` with our model loading, data loading and composed rewards.

Backends are registered through the ``grpo_register_trainer_backends`` hook (:mod:`grpo_core.plugin`)
and chosen with ``[trainer] backend``; nothing here is imported until a backend is used.
"""
