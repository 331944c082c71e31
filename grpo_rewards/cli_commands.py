"""Deprecated path of :mod:`grpo_rewards.reward_commands` (the ``builtin_cli`` entry point's target in installs made before the rename).

This module *is* that one (a ``sys.modules`` alias), so what is set or patched here reaches it.
"""

from __future__ import annotations

import sys

from grpo_rewards import reward_commands

sys.modules[__name__] = reward_commands
