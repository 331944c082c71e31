"""What runs inside the zygote and its forked children: stdlib only, no project imports.

The zygote loads this package under a private name (``_grpo_jail``) without importing
``grpo_rewards``, so a sandboxed program finds nothing of the trainer in memory. The
parent imports the same modules as ``grpo_rewards.sandbox.jail`` for probing.
"""
