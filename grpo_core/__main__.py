"""``python -m grpo_core ...`` runs the ``grpo`` command line; ``torchrun --nproc_per_node N -m grpo_core train
run.toml`` starts it once per rank (grpo_core.parallel.distributed)."""

from grpo_rewards.command_line import main

raise SystemExit(main())
