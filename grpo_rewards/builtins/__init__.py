"""The built-in rewards and verifiers, one module each; registered by :mod:`grpo_rewards.builtins.catalogue`."""
