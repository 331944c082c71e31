"""None is described the same way everywhere a reward author or user reads about it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULE = ("None means the reward does not apply to that row: the row is left out of that reward's mean and its "
        "term is left out of the weighted total (as in TRL); a row where every reward returned None has no total, "
        "gets advantage 0, and is named in a warning.")


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", ""))


def test_the_none_rule_reads_the_same_in_the_readme_the_author_docs_and_the_modules():
    sources = {
        "README.md": (ROOT / "README.md").read_text(),
        "docs/writing-plugins.md": (ROOT / "docs" / "writing-plugins.md").read_text(),
        **{name: importlib.import_module(name).__doc__ for name in ("grpo_rewards.contract", "grpo_rewards.compose")},
    }
    assert [name for name, text in sources.items() if RULE not in flat(text)] == []
