"""Deprecated path of :mod:`grpo_rewards.builtins.catalogue` (the ``builtin_rewards`` entry point's target in installs made before the rename).

This module *is* that one (a ``sys.modules`` alias), so what is set or patched here reaches it.
"""

from __future__ import annotations

import sys

from grpo_rewards.builtins import catalogue

sys.modules[__name__] = catalogue
