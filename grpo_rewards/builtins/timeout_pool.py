"""Deprecated path of :mod:`grpo_rewards.isolation.pool` (the process pool with a hard per-item time limit).

This module *is* that module (``sys.modules`` alias): ``timeout_pool.MAX_CHUNK = 1``, ``timeout_pool.shutdown()``
and ``timeout_pool._pools`` reach the one pool. Import :mod:`grpo_rewards.isolation.pool` in new code.
"""

from __future__ import annotations

import sys

from grpo_rewards.isolation import pool

sys.modules[__name__] = pool
