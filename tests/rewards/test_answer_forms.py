"""The grammar's table of forms (grpo_rewards/answers/forms.py): every row holds when its reward scores it, and
docs/answers.md shows exactly the table."""

from __future__ import annotations

import pytest

from grpo_rewards import reward
from grpo_rewards.answers import forms

TIERS = {"exact": 1.0, "near": 0.0, "close": 0.0, "far": 0.0, "unparsable": 0.0}
PARAMS = {"exact_match": {"value": 1.0, "wrong_value": 0.0}, "math_equivalence": {"workers": 1},
          "numeric_proximity": {"mode": "tiered", "tiers": TIERS, "missing_value": 0.0}}


@pytest.fixture(scope="module")
def built() -> dict:
    return {name: reward(name, **PARAMS[name]) for name in {f.reward for f in forms.FORMS}}


@pytest.mark.parametrize("form", forms.FORMS, ids=lambda f: f"{f.section}: {f.completion[:40]}")
def test_each_form_scores_as_the_table_says(built: dict, form: forms.Form) -> None:
    assert built[form.reward]([form.completion], answer=[form.reference]) == [1.0 if form.paid else 0.0]


def test_the_page_shows_the_table() -> None:
    page = forms.PAGE.read_text(encoding="utf-8")
    assert forms.render() in page, "docs/answers.md is stale: run python -m grpo_rewards.answers.forms"


def test_write_replaces_only_the_generated_part(tmp_path) -> None:
    page = tmp_path / "answers.md"
    page.write_text(f"head\n{forms.BEGIN}\nold rows\n{forms.END}\ntail\n", encoding="utf-8")
    forms.write(page)
    assert page.read_text(encoding="utf-8") == f"head\n{forms.render()}\ntail\n"
