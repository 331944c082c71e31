"""The hook implementation grpo finds through this package's ``grpo`` entry point."""

from __future__ import annotations

from typing import Any

from grpo_rewards import RewardSpec, hookimpl
from grpo_rewards_json.rewards import json_schema, json_valid

SPECS = [
    RewardSpec(
        name="json_valid",
        factory=json_valid,
        example='[rewards.is_json]\nuse = "json_valid"\ntop_level = "object"   # or "array", "container", "any"\n',
    ),
    RewardSpec(
        name="json_schema",
        factory=json_schema,
        columns=("schema",),
        example=(
            '[rewards.fits_schema]\nuse = "json_schema"\n'
            'schema = { type = "object", required = ["name"], properties = { name = { type = "string" } } }\n'
            '# or, one schema per row: schema_column = "schema"\n'
        ),
    ),
]


@hookimpl
def grpo_register_rewards(register: Any) -> None:
    for spec in SPECS:
        register(spec)
