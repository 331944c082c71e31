"""`grpo_rewards` imports without torch, and loading every plugin (ours included) stays torch-free."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import grpo_rewards
registry = grpo_rewards.get_registry()
assert registry.rewards, "no rewards registered"
heavy = sorted(m for m in ("torch", "transformers", "trl", "datasets", "math_verify", "sympy") if m in sys.modules)
print(",".join(heavy))
"""


def test_rewards_and_plugin_loading_do_not_import_torch():
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
