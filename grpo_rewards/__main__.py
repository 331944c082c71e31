"""``python -m grpo_rewards`` runs the ``grpo`` command line."""

from grpo_rewards.command_line import main

raise SystemExit(main())
