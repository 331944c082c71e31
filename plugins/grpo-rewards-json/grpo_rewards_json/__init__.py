"""grpo-rewards-json: structured-output rewards for grpo-toolkit.

``json_valid`` scores a completion that holds JSON (whole, or in its last ```json fence);
``json_schema`` scores JSON valid against a JSON Schema from a parameter or a dataset column.
Input is capped in size and nesting before it is parsed (:mod:`grpo_rewards_json.parse`).
"""

from grpo_rewards_json.parse import extract_json_text, nesting_depth, parse_json
from grpo_rewards_json.rewards import json_schema, json_valid

__all__ = ["extract_json_text", "json_schema", "json_valid", "nesting_depth", "parse_json"]
