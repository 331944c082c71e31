"""grpo_core: a lean, memory-optimized GRPO trainer.

Public API (imported lazily so that ``import grpo_core`` stays cheap):
``Trainer``, ``load_config``.
"""
