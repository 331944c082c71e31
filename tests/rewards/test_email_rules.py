"""email_rules: each rule and its parameter, missing columns, signature detection, properties."""

from __future__ import annotations

import argparse
import json
import math
import random

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grpo_rewards
from grpo_rewards.builtins.email_rules import email_rules, keyword_share, name_parts
from grpo_rewards.builtins.email_signature import contact_kinds, has_contact, split_signature

# distinct amounts, so a total tells which rules fired
AMOUNTS = {"keyword_reward": 1.0, "exact_reward": 2.0, "too_long_penalty": -4.0, "name_reward": 8.0, "signature_reward": 16.0}
ONLY = {k: 0.0 for k in AMOUNTS}

EMAIL = """Dear Ms. Smith,

Thanks for sending the invoice. I will pay it by Friday.

Best regards,
John Doe
Acme Corp, 221B Baker Street, London NW1 6XE
"""


def one(text, **columns):
    return email_rules(**AMOUNTS)([text], **{k: [v] for k, v in columns.items()})[0]


def test_every_rule_fires_with_its_own_amount():
    ideal = EMAIL
    assert one(EMAIL, keywords=["invoice", "friday"], ideal=ideal, recipient="Jane Smith") == 1 + 2 + 8 + 16
    assert one(EMAIL, keywords=["invoice", "monday"], ideal="Other text", recipient="Bob Jones") == 16
    assert email_rules(max_words=5, **AMOUNTS)([EMAIL])[0] == -4 + 16


def test_missing_columns_mean_the_rule_does_not_apply():
    reward = email_rules(**AMOUNTS)
    assert reward([EMAIL]) == [16.0]  # only the signature rule reads no column
    assert reward([EMAIL, EMAIL], keywords=[None, []], ideal=[None, "  "], recipient=[None, ""]) == [16.0, 16.0]


def test_keywords_whole_words_any_case_list_or_comma_string():
    assert keyword_share("The INVOICE is due", ["invoice"]) == 1.0
    assert keyword_share("The invoices are due", ["invoice"]) == 0.0  # whole words only
    assert keyword_share("Call me re: C++ later", ["c++"]) == 1.0
    reward = email_rules(**{**ONLY, "keyword_reward": 3.0})
    assert reward(["pay the invoice friday"], keywords=["invoice, Friday"]) == [3.0]
    assert reward(["pay the invoice"], keywords=[["invoice", "friday"]]) == [0.0]
    partial = email_rules(**{**ONLY, "keyword_reward": 3.0}, keyword_partial=True)
    assert partial(["pay the invoice"], keywords=[["invoice", "friday"]]) == [1.5]


def test_exact_match_ignores_whitespace_runs_not_case():
    reward = email_rules(**{**ONLY, "exact_reward": 2.0})
    assert reward(["Hi  Bob,\n\nSee you.\n"], ideal=["Hi Bob, See you."]) == [2.0]
    assert reward(["hi bob, see you."], ideal=["Hi Bob, See you."]) == [0.0]


def test_too_long_threshold_is_strict_and_zero_disables():
    reward = email_rules(**{**ONLY, "too_long_penalty": -1.5}, max_words=3)
    assert reward(["one two three", "one two three four"]) == [0.0, -1.5]
    assert email_rules(**{**ONLY, "too_long_penalty": -1.5}, max_words=0)(["word " * 10_000]) == [0.0]


def test_recipient_name_parts_in_the_body_only():
    assert name_parts("Dr. Jane Q. Smith-Jones") == ["Jane", "Smith", "Jones"]
    reward = email_rules(**{**ONLY, "name_reward": 8.0})
    assert reward(["Dear Ms. Smith, hello."], recipient=["Jane Smith"]) == [8.0]
    assert reward(["Hello Jane!"], recipient=["Jane Smith"]) == [8.0]
    assert reward(["Hello Janet!"], recipient=["Jane"]) == [0.0]
    assert reward(["Hello,\nsee you.\nBest,\nJane Smith"], recipient=["Jane Smith"]) == [0.0]  # signature is not the body


@pytest.mark.parametrize(("body", "recipient", "named"), [
    ("Hello,\nI will send the files today.", "Grace Will", False),  # the verb, not the name
    ("Hello,\nThe files are ready. Will you check them?", "Grace Will", False),  # capitalised: a sentence start
    ("Hello,\nI spoke to Will about the files.", "Grace Will", True),
    ("Hi Grace,\nthe files are ready.", "Grace Will", True),
    ("Grace, the files are ready.", "Grace Will", True),  # a vocative greeting
    ("Will, the files are ready.", "Grace Will", True),
    ("Will you check the files, please?\nThanks", "Grace Will", False),
    ("Hi team,\nwe may ship in May.", "May Chen", True),
    ("Hi team,\nMay we ship? We may.", "May Chen", False),
    ("Hello,\nby the grace of the deadline we shipped.", "Grace Will", False),
    ("Hello,\nthe GRACE period ends.", "Grace Will", False),  # shouting, not naming
    ("Dear Mark,\nI marked the invoice.", "Mark Bell", True),
    ("Hello,\nI marked the invoice and rang the bell.", "Mark Bell", False),
    ("王伟，你好：\n附件已发送。", "王伟", True),
    ("你好：\n附件已发送。", "王伟", False),
    ("مرحبا أحمد،\nشكرا", "أحمد", True),
    ("Hello Jane-Marie,\nthanks.", "Jane-Marie Dupont", True),
])
def test_names_are_matched_as_names(body, recipient, named):
    reward = email_rules(**{**ONLY, "name_reward": 8.0})
    assert reward([body], recipient=[recipient]) == [8.0 if named else 0.0]


@pytest.mark.parametrize(
    ("block", "kinds"),
    [
        ("John\n(650) 253-0000", ["phone"]),
        ("John\n+44 20 7946 0958", ["phone"]),
        ("John\nMobile: 650.253.0000", ["phone"]),
        ("John\njohn.doe@example.co.uk", ["email"]),
        ("John\n1600 Pennsylvania Ave NW", ["address"]),
        ("John\nSpringfield, IL 62704", ["address"]),
        ("John\nLondon NW1 6XE", ["address"]),
        ("John\nP.O. Box 1234", ["address"]),
        ("John Doe\nSales team", []),
        ("John\n555-1234", []),  # too short to be a valid number
        ("John\nin 3 weeks", []),
        ("Sam, 2 weeks on the way", []),  # a number, words and "way": prose, not an address
        ("Sam\nback in 2 days, on the road", []),
        ("John\n12 W 34th St", ["address"]),
        ("Jana\nHauptstraße 5, 10115 Berlin", ["address"]),
        ("Jean\n12 rue de la Paix, 75002 Paris", ["address"]),
    ],
)
def test_contact_kinds(block, kinds):
    assert contact_kinds(block, "US") == kinds
    assert has_contact(block, "US") == bool(kinds)


def test_phone_region_decides_how_national_numbers_are_read():
    assert contact_kinds("020 7946 0958", "GB") == ["phone"]
    assert contact_kinds("020 7946 0958", "US") == []


@pytest.mark.parametrize(
    ("text", "block"),
    [
        ("Hi,\nok.\n\nBest regards,\nJohn\n(650) 253-0000", "John\n(650) 253-0000"),
        ("Hi,\nok.\nThanks!\nJohn", "John"),
        ("Hi,\nok.\n-- \nJohn", "John"),
        ("Hi,\nThanks, see below.\nCall (650) 253-0000", ""),  # "Thanks, see below." is not a closing line
        ("Hi,\ncall me at (650) 253-0000.", ""),  # no closing: no signature block
        ("Hi\nThanks,\nA\nRegards,\nB", "B"),  # the last closing wins
    ],
)
def test_signature_block_is_what_follows_the_last_closing_line(text, block):
    assert split_signature(text)[1] == block


def test_phone_in_the_body_is_not_a_signature():
    reward = email_rules(**{**ONLY, "signature_reward": 1.0})
    assert reward(["Call me at (650) 253-0000 today.", "Call me today.\nThanks,\n(650) 253-0000"]) == [0.0, 1.0]


def test_junk_rows_score_none_and_chat_messages_work():
    reward = email_rules(**AMOUNTS)
    chat = [{"role": "assistant", "content": EMAIL}]
    assert reward([chat, None, 42, {"a": 1}]) == [16.0, None, None, None]
    assert reward([EMAIL, EMAIL], keywords=[17, {"x": 1}], recipient=[3.5, ["Jane"]]) == [16.0, 16.0]


def test_wrong_length_column_is_an_error_naming_it():
    with pytest.raises(ValueError, match="column 'keywords'"):
        email_rules()([EMAIL, EMAIL], keywords=[["a"]])


@pytest.mark.parametrize(
    ("params", "message"), [({"max_words": -1}, "max_words"), ({"phone_region": "XX"}, "phone_region")]
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        email_rules(**params)


def test_registered_and_configurable_from_toml(tmp_path):
    assert grpo_rewards.reward("email_rules", **{**ONLY, "name_reward": 5.0})(
        ["Hi Jane"], recipient=["Jane"]
    ) == [5.0]
    config = tmp_path / "r.toml"
    config.write_text('[rewards.mail]\nuse = "email_rules"\nmax_words = 3\ntoo_long_penalty = -2.0\nsignature_reward = 0.5\n')
    composed = grpo_rewards.load_rewards(str(config))
    assert composed(["a b c d", "a\nThanks,\njo@x.org"]) == [-2.0, 0.5]


# ------------------------------------------------------------------ properties ----

PROPERTY = settings(max_examples=60, deadline=None)
words = st.text(alphabet="abcdefghij ABC,.\n-+@0123456789()", max_size=200)
columns = st.fixed_dictionaries(
    {},
    optional={
        "keywords": st.one_of(st.none(), st.text(max_size=20), st.lists(st.text(max_size=8), max_size=4), st.integers()),
        "ideal": st.one_of(st.none(), st.text(max_size=40)),
        "recipient": st.one_of(st.none(), st.text(max_size=20), st.integers()),
    },
)


@PROPERTY
@given(texts=st.lists(st.one_of(words, st.text(max_size=100)), min_size=1, max_size=6), cols=columns)
def test_scores_are_finite_and_in_documented_bounds(texts, cols):
    reward = email_rules(**AMOUNTS)
    scores = reward(texts, **{k: [v] * len(texts) for k, v in cols.items()})
    assert all(s is not None and math.isfinite(s) and -4.0 <= s <= 1 + 2 + 8 + 16 for s in scores)


@PROPERTY
@given(rows=st.lists(st.tuples(words, st.lists(st.sampled_from(["pay", "bob", "a,b", "Friday"]), max_size=3),
                              st.sampled_from(["Bob Smith", "Dr. Ann Lee", "", "x"])), min_size=1, max_size=8),
       seed=st.integers(0, 10**6))
def test_batch_equals_rows_one_by_one_in_any_order(rows, seed):
    reward = email_rules(**AMOUNTS)
    texts, kws, names = (list(c) for c in zip(*rows, strict=True))
    batch = reward(texts, keywords=kws, recipient=names, ideal=texts)
    assert batch == [reward([t], keywords=[k], recipient=[n], ideal=[t])[0] for t, k, n in rows]
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    shuffled = reward([texts[i] for i in order], keywords=[kws[i] for i in order],
                      recipient=[names[i] for i in order], ideal=[texts[i] for i in order])
    assert shuffled == [batch[i] for i in order]


@PROPERTY
@given(junk=st.lists(st.one_of(st.none(), st.integers(), st.floats(), st.dictionaries(st.text(), st.integers()),
                               st.binary()), min_size=1, max_size=5))
def test_junk_completions_never_raise(junk):
    assert email_rules()(junk) == [None] * len(junk)


@PROPERTY
@given(body=words, keywords=st.lists(st.text(alphabet="abcdefghijklmnop", min_size=1, max_size=8), min_size=1, max_size=4))
def test_adding_the_keywords_fires_the_keyword_rule(body, keywords):
    reward = email_rules(**{**ONLY, "keyword_reward": 1.0})
    assert reward([body + "\n" + " ".join(keywords)], keywords=[keywords]) == [1.0]


REGIONS = ["US", "GB", "DE", "FR", "IN", "JP", "BR", "AU"]
FORMATS = [phonenumbers.PhoneNumberFormat.INTERNATIONAL, phonenumbers.PhoneNumberFormat.E164,
           phonenumbers.PhoneNumberFormat.NATIONAL]


@PROPERTY
@given(region=st.sampled_from(REGIONS), kind=st.sampled_from([phonenumbers.PhoneNumberType.MOBILE,
                                                               phonenumbers.PhoneNumberType.FIXED_LINE]),
       fmt=st.sampled_from(FORMATS), closing=st.sampled_from(["Best regards,", "Thanks", "--", "Sincerely,"]))
def test_a_phone_number_in_any_format_after_a_closing_fires_the_signature_rule(region, kind, fmt, closing):
    number = phonenumbers.example_number_for_type(region, kind)
    shown = phonenumbers.format_number(number, fmt)
    reward = email_rules(**{**ONLY, "signature_reward": 1.0}, phone_region=region)
    assert reward([f"Hello,\nsee you soon.\n{closing}\nAlex\n{shown}"]) == [1.0]


def test_example_config_scores_the_example_completions(tmp_path):
    from pathlib import Path

    from grpo_rewards.reward_commands import cmd_rewards_score  # what `grpo rewards score` runs

    examples = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "scored.jsonl"
    args = argparse.Namespace(config=str(examples / "email_rewards.toml"), output=str(out), batch_size=4,
                              input=str(examples / "email_completions.jsonl"))
    assert cmd_rewards_score(args) == 0

    totals = [json.loads(line)["total"] for line in out.read_text().splitlines()]
    assert totals == [3.0, 2.0, 0.0, 3.0, 3.0, 2.0, 3.0, 2.0, 3.0, 0.0]
