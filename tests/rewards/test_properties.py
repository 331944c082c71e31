"""Hypothesis properties of extraction, number handling and every built-in reward of this package.

* a number rendered in any supported way parses, and verifies, equal to itself;
* scores are finite and inside each reward's documented bounds;
* a batch scores the same as its rows one by one, and in any order;
* junk completions and junk references never raise;
* default semantics equal the Unsloth notebook functions wherever the docs say so.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from grpo_rewards.answers.extraction import extract_answer
from grpo_rewards.answers.normalize import format_number, parse_number
from grpo_rewards.builtins.exact_match import exact_match, make_numeric_verifier
from grpo_rewards.builtins.formats import soft_format, strict_format
from grpo_rewards.builtins.integer_format import integer_format
from grpo_rewards.builtins.numeric_proximity import TIERS, numeric_proximity
from grpo_rewards.builtins.xml_count import xml_count

from . import unsloth_reference as unsloth

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ numbers ----

decimals = st.decimals(min_value=-10**9, max_value=10**9, places=4, allow_nan=False, allow_infinity=False)
fractions_ = st.builds(Fraction, st.integers(-10**6, 10**6), st.integers(1, 10**4))


def with_commas(digits: str) -> str:
    head, _, tail = digits.partition(".")
    return f"{int(head):,}" + (f".{tail}" if tail else "")


@st.composite
def decimal_renderings(draw) -> tuple[Fraction, str]:
    """(value, one supported rendering of it)."""
    d: Decimal = draw(decimals)
    value = Fraction(d)
    digits = format(abs(d), "f")
    extra_zeros = draw(st.integers(0, 2))
    if extra_zeros:
        digits += ("" if "." in digits else ".") + "0" * extra_zeros
    if draw(st.booleans()):
        digits = with_commas(digits)
    if draw(st.booleans()) and value == int(value) and "," not in digits:
        mantissa = abs(int(value))
        digits = f"{mantissa * 10}e-1"  # scientific: 720e-1 == 72
    minus = draw(st.sampled_from(["-", "−", "–"])) if value < 0 else draw(st.sampled_from(["", "+"]))
    currency = draw(st.sampled_from(["", "$", "\\$", "€"]))
    sign_first = draw(st.booleans())
    text = f"{minus}{currency}{digits}" if sign_first else f"{currency}{minus}{digits}"
    text += draw(st.sampled_from(["", "%", "\\%", "."]))
    wrap = draw(st.sampled_from(["{}", " {} ", "${}$", "\\({}\\)", "\\boxed{{{}}}", "\\text{{{}}}", "\n{}\n"]))
    return value, wrap.format(text)


@st.composite
def fraction_renderings(draw) -> tuple[Fraction, str]:
    value: Fraction = draw(fractions_)
    k = draw(st.integers(1, 3))  # not necessarily reduced: 6/8 is 3/4
    num, den = abs(value.numerator) * k, value.denominator * k
    minus = "-" if value < 0 else ""
    text = draw(st.sampled_from([
        f"{minus}{num}/{den}", f"{minus}{num} / {den}", f"{minus}\\frac{{{num}}}{{{den}}}",
        f"{minus}\\dfrac{{{num}}}{{{den}}}", f"${minus}\\frac{{{num}}}{{{den}}}$",
    ]))
    return value, text


renderings = st.one_of(decimal_renderings(), fraction_renderings())


@SETTINGS
@given(renderings)
def test_any_rendering_parses_to_its_value(pair):
    value, text = pair
    assert parse_number(text) == value


@SETTINGS
@given(st.one_of(decimals.map(Fraction), fractions_))
def test_canonical_format_round_trips(value):
    assert parse_number(format_number(value)) == value


CONTAINERS = [
    "<reasoning>\nwork it out: 3 + 4\n</reasoning>\n<answer>\n{}\n</answer>\n",
    "Some steps with 12 and 7.\n#### {}",
    "so the result is \\boxed{{{}}}.",
    "We compute 5 * 6.\nFinal answer: {}",
]


@SETTINGS
@given(renderings, st.sampled_from(CONTAINERS), st.sampled_from(["plain", "commas", "gsm8k"]))
def test_rendered_answer_verifies_equal_to_itself(pair, container, ref_style):
    value, text = pair
    completion = container.format(text)
    reference = format_number(value)
    if ref_style == "commas" and value.denominator == 1:
        reference = f"{value.numerator:,}"
    elif ref_style == "gsm8k":
        reference = f"Reasoning about 17 things.\n#### {reference}"
    assert make_numeric_verifier()(text, reference).ok
    assert exact_match()([completion], answer=[reference]) == [2.0]
    assert numeric_proximity()([completion], answer=[reference]) == [1.0]
    assert numeric_proximity(mode="tiered")([completion], answer=[reference]) == [TIERS["exact"]]


@SETTINGS
@given(renderings, renderings)
def test_different_values_never_verify_equal(a, b):
    assume(a[0] != b[0])
    assert not make_numeric_verifier()(a[1], b[1]).ok


# ------------------------------------------------------------- completions ----

FRAGMENTS = ["<reasoning>", "</reasoning>", "<think>", "</think>", "<answer>", "</answer>", "\n", " ", "####",
             "\\boxed{", "}", "{", "Answer:", "72", "-3.5", "1,080", "$", "/", "x", "word", "。", "😀", "\x00"]
structured = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)
junk_text = st.one_of(st.text(max_size=300), structured)
chat = junk_text.map(lambda t: [{"role": "assistant", "content": t}])
completions_ = st.lists(st.one_of(junk_text, chat), min_size=1, max_size=12)
references = st.one_of(st.none(), st.text(max_size=20), st.integers(-1000, 1000).map(str), st.integers(-10, 10),
                       st.floats(allow_nan=True), structured)


def text_of(c) -> str:
    return c if isinstance(c, str) else c[-1]["content"]


def in_bounds(name: str, score: float | None, text: str) -> bool:
    if score is None:
        return name in ("exact_match", "numeric_proximity", "numeric_proximity_tiered")
    if not math.isfinite(score):
        return False
    n = len(text)
    return {
        "exact_match": score in (0.0, 2.0),
        "integer_format": score in (0.0, 0.5),
        "xml_count": -2 * 0.001 * n - 1e-9 <= score <= 0.5 + 0.001 + 1e-9,
        "xml_count_lenient": -0.001 * n - 1e-9 <= score <= 0.5 + 1e-9,
        "strict_format": score in (0.0, 0.5),
        "soft_format": score in (0.0, 0.5),
        "numeric_proximity": 0.0 <= score <= 1.0,
        "numeric_proximity_tiered": score in (*TIERS.values(), -2.0),
    }[name]


REWARDS = {
    "exact_match": exact_match(),
    "integer_format": integer_format(),
    "xml_count": xml_count(),
    "xml_count_lenient": xml_count(mode="lenient"),
    "strict_format": strict_format(),
    "soft_format": soft_format(),
    "numeric_proximity": numeric_proximity(),
    "numeric_proximity_tiered": numeric_proximity(mode="tiered"),
}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(completions_, st.data())
def test_junk_never_raises_and_scores_stay_in_bounds(completions, data):
    refs = data.draw(st.lists(references, min_size=len(completions), max_size=len(completions)))
    for name, fn in REWARDS.items():
        scores = fn(completions, answer=refs)
        assert len(scores) == len(completions)
        for c, s in zip(completions, scores):
            assert in_bounds(name, s, text_of(c)), (name, c, s)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(completions_, st.data())
def test_batch_equals_rows_one_by_one_and_any_order(completions, data):
    refs = data.draw(st.lists(references, min_size=len(completions), max_size=len(completions)))
    order = data.draw(st.permutations(range(len(completions))))
    for name, fn in REWARDS.items():
        batch = fn(completions, answer=refs)
        single = [fn([c], answer=[r])[0] for c, r in zip(completions, refs)]
        shuffled = fn([completions[i] for i in order], answer=[refs[i] for i in order])
        assert batch == single, name
        assert shuffled == [batch[i] for i in order], name


@SETTINGS
@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6), st.integers(-10**6, 10**6))
def test_proximity_is_monotone_in_distance(ref, a, b):
    assume(abs(a - ref) <= abs(b - ref))
    fn = numeric_proximity()
    sa, sb = fn([f"<answer>{a}</answer>", f"<answer>{b}</answer>"], answer=[str(ref)] * 2)
    assert sa >= sb
    if abs(a - ref) < abs(b - ref) and abs(b - ref) <= 10 * max(abs(ref), 1):
        assert sa > sb  # strictly, wherever floats can tell them apart


# -------------------------------------------------------- Unsloth semantics ----

single_line = st.text(alphabet=st.characters(blacklist_characters="\n\r<>", blacklist_categories=("Cs",)), max_size=40)


@SETTINGS
@given(st.lists(st.sampled_from(["<reasoning>", "</reasoning>", "<answer>", "</answer>", "\n", "x", " 7 "]),
                max_size=25).map("".join))
def test_xml_count_is_count_xml(text):
    # the notebook's terms on any input without the order check; with it (the default), wherever the tags are in order
    assert math.isclose(xml_count(check_order=False)([text])[0], unsloth.count_xml(text), abs_tol=1e-12)
    first = [p for p in (text.find(t) for t in ("<reasoning>", "</reasoning>", "<answer>", "</answer>")) if p >= 0]
    if first == sorted(first):
        assert math.isclose(xml_count()([text])[0], unsloth.count_xml(text), abs_tol=1e-12)


@SETTINGS
@given(single_line, single_line, st.sampled_from(["", "\n", "\n\n", "x", " "]))
def test_strict_format_agrees_with_the_notebook_on_single_line_sections(reasoning, answer, tail):
    text = f"<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{answer}\n</answer>{tail}"
    assert strict_format()([text]) == [unsloth.strict_format(text)]


@SETTINGS
@given(single_line, single_line, st.sampled_from(["", " ", "\n", " \n\t"]), single_line)
def test_soft_format_agrees_with_the_notebook_without_newlines_in_blocks(reasoning, answer, gap, tail):
    text = f"<reasoning>{reasoning}</reasoning>{gap}<answer>{answer}</answer>{tail}"
    assert soft_format()([text]) == [unsloth.soft_format(text)]


@SETTINGS
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters="<>"), max_size=12))
def test_integer_format_agrees_with_the_notebook_on_ascii_answers(answer):
    text = f"<reasoning>\nwork\n</reasoning>\n<answer>\n{answer}\n</answer>\n"
    assert integer_format(extract="answer_tag")([text]) == [unsloth.int_reward(text)]


@SETTINGS
@given(single_line, st.one_of(st.integers(-10**6, 10**6).map(str), single_line))
def test_exact_match_accepts_whatever_the_notebook_accepts(prefix, reference):
    assume(reference.strip())
    text = f"{prefix}<answer>\n{reference}\n</answer>\n"
    if unsloth.correctness(text, reference.strip()) == 2.0:
        assert exact_match(extract="answer_tag")([text], answer=[reference]) == [2.0]


# -------------------------------------------------------------- extraction ----

no_tags = st.text(max_size=80).filter(lambda t: "<answer>" not in t.lower() and "</answer>" not in t.lower())


def _emphasised(text: str) -> bool:
    """Markdown emphasis around the whole answer (``**12**``), which the extraction peels on purpose."""
    t = text.strip()
    return len(t) > 2 and t[0] in "*_" and t[-1] == t[0]


@SETTINGS
@given(no_tags, no_tags.filter(lambda t: t.strip() and not _emphasised(t)), no_tags)
def test_tagged_answer_round_trips(before, answer, after):
    # "`<answer>`" is the tag quoted as code, not an answer tag: the extraction skips it on purpose
    assume(not (before.endswith("`") and answer.startswith("`")))
    assert extract_answer(f"{before}<answer>{answer}</answer>{after}", "answer_tag") == answer.strip()


@SETTINGS
@given(st.text(max_size=80).filter(lambda t: "####" not in t), single_line.filter(lambda t: t.strip() and "#" not in t))
def test_gsm8k_answer_round_trips(before, answer):
    assert extract_answer(f"{before}\n#### {answer}", "gsm8k") == answer.strip()


balanced = st.recursive(st.text(alphabet="abc123 +", max_size=5), lambda inner: inner.map(lambda t: "{" + t + "}")
                        | st.tuples(inner, inner).map("".join), max_leaves=8)


@SETTINGS
@given(st.text(max_size=40).filter(lambda t: "\\boxed" not in t and "\\fbox" not in t), balanced.filter(str.strip))
def test_boxed_answer_round_trips(before, inside):
    assert extract_answer(f"{before}\\boxed{{{inside}}} done", "boxed") == inside.strip()


@SETTINGS
@given(st.text(max_size=200), st.sampled_from(["auto", "answer_tag", "gsm8k", "boxed", "answer_prefix", "last_number"]))
def test_extraction_never_raises_and_returns_stripped_text(text, method):
    out = extract_answer(text, method)
    assert out is None or (out == out.strip() and out)
