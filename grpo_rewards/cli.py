"""Deprecated path of :mod:`grpo_rewards.command_line` (the target of the installed ``grpo`` console script).

This module *is* that one (a ``sys.modules`` alias), so what is set or patched here reaches it.
"""

from __future__ import annotations

import sys

from grpo_rewards import command_line

if __name__ == "__main__":  # python -m grpo_rewards.cli
    raise SystemExit(command_line.main())

sys.modules[__name__] = command_line
