"""``python -m grpo_rewards`` runs the ``grpo`` command line."""

from grpo_rewards.cli import main

raise SystemExit(main())
