"""Registers the sandbox backends, the code rewards and ``grpo sandbox`` (filled in by the sandbox work)."""
