"""The grammar's table of forms (grpo_rewards/answers/forms.py): every row holds when its reward scores it, every
literal reads as its row says, and docs/answers.md is exactly the page rendered from the table."""

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


@pytest.mark.parametrize("reading", forms.READINGS, ids=lambda r: r.written[0])
def test_each_literal_reads_as_the_table_says(reading: forms.Reading) -> None:
    assert [forms.shown(w) for w in reading.written] == list(reading.values)


def test_the_page_is_the_rendered_table() -> None:
    page = forms.PAGE.read_text(encoding="utf-8")
    assert page == forms.render(), "docs/answers.md is stale: run python -m grpo_rewards.answers.forms"


def test_every_section_of_the_table_is_on_the_page() -> None:
    page = forms.render()
    for form in forms.FORMS:
        assert f"| {forms._cell(form.completion)} | {forms._cell(form.reference)} | {form.reward} |" in page


def test_write_writes_the_rendered_page(tmp_path) -> None:
    page = tmp_path / "answers.md"
    page.write_text("old\n", encoding="utf-8")
    forms.write(page)
    assert page.read_text(encoding="utf-8") == forms.render()
