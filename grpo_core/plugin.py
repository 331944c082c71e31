"""Registers the trainer's commands (``grpo train``, ``grpo demo``, ...) and backends (filled in by the trainer work)."""
