"""Answer extraction (grpo_rewards.answers.extraction): every method, the auto order, and bad parameters."""

import re

import pytest

from grpo_rewards.answers.extraction import AUTO_ORDER, METHODS, check_extraction, extract_answer

UNSLOTH = "<reasoning>\nStep one.\nStep two.\n</reasoning>\n<answer>\n72\n</answer>\n"
GSM8K = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nShe sold 48+24 = <<48+24=72>>72 clips.\n#### 72"


@pytest.mark.parametrize(
    "text, expected",
    [
        (UNSLOTH, "72"),
        ("<answer>4</answer>", "4"),
        ("<ANSWER> 4 </Answer>", "4"),
        # several final answers are hedging: all of them, as a list (a number reward finds no number)
        ("<answer>1</answer> no wait <answer>2</answer>", "1, 2"),
        ("<answer>40</answer><answer>41</answer><answer>42</answer>", "40, 41, 42"),
        ("<answer>3</answer><answer>1</answer><answer> 3 </answer>", "3, 1"),  # duplicates dropped, order kept
        ("<answer>x + 1</answer><answer>x+1</answer>", "x + 1"),  # whitespace aside, the same answer
        ("<answer>42</answer> again <answer>42</answer>", "42"),
        ("<answer>4</answer> then <answer>", "4"),  # an empty last tag falls back to the previous one
        ("<answer>4</answer> then <answer>  </answer>", "4"),
        ("<answer>\n  17", "17"),  # unclosed (generation cut at max length)
        ("<answer>\nfoo <answer>bar", "foo, bar"),  # an unclosed tag runs to the next one
        ("<answer></answer>", None),
        ("no tags at all", None),
    ],
)
def test_answer_tag(text, expected):
    assert extract_answer(text, "answer_tag") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (GSM8K, "72"),
        ("####72", "72"),
        ("#### $1,080  \n", "$1,080"),
        ("#### 1\n#### 2", "1, 2"),  # two different #### lines are a hedge, as two boxes are
        ("####   \n", None),
        ("#### \n 72\nmore", "72"),  # the answer on the next line
        ("no hashes", None),
    ],
)
def test_gsm8k(text, expected):
    assert extract_answer(text, "gsm8k") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so \\boxed{42}.", "42"),
        ("\\boxed{1} then \\boxed{2}", "1, 2"),  # several boxes: all of them, as a list
        ("\\boxed{2} or \\boxed{3} or \\fbox{2}", "2, 3"),
        ("\\boxed{7} so \\boxed{ 7 }", "7"),
        ("\\boxed{\\boxed{5}}", "\\boxed{5}"),  # a box inside a box is part of its answer
        ("\\boxed{1} then \\boxed{2", None),  # an unbalanced last box: no answer
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{ {a}{b} }", "{a}{b}"),
        ("\\fbox{7}", "7"),
        ("\\boxed {7}", "7"),
        ("\\boxed 5", "5"),
        ("\\boxed{unbalanced", None),
        ("\\boxed{}", None),
        ("no box", None),
    ],
)
def test_boxed(text, expected):
    assert extract_answer(text, "boxed") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Answer: 42", "42"),
        ("some work\nA: 17", "17"),
        ("Final answer: $18", "$18"),
        ("**Answer:** 42", "42"),
        ("**Answer: 42**", "42"),
        ("## Final Answer:\n  12", "12"),
        ("Answer: 1\nmore\nAnswer: 2\n", "1, 2"),  # two different answer lines: a hedge
        ("answer：5", "5"),  # full-width colon
        ("The answer is 5", "5"),  # announced in words
        ("the answer is correct, so it is 5", None),  # words after "is" announce nothing
        ("Answer:\n\nnothing", None),
    ],
)
def test_answer_prefix(text, expected):
    assert extract_answer(text, "answer_prefix") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I have 3 apples and 4 pears, so 7.", "7"),
        ("It costs $1,234.50 in total", "$1,234.50"),
        ("It costs -\\$5 in total", "-\\$5"),
        ("it is -5", "-5"),
        ("it is −5", "−5"),
        ("ratio 3/4", "3/4"),
        ("tiny 1.5e-3", "1.5e-3"),
        ("x = .5", ".5"),
        ("on 2023-05-01", None),  # a date is not a number, and no part of it is
        ("10-3=7", "7"),
        ("3x5=15", "15"),
        ("version 1.2.3", None),
        ("no numbers", None),
    ],
)
def test_last_number(text, expected):
    assert extract_answer(text, "last_number") == expected


def test_regex_group_and_whole_match():
    assert extract_answer("foo=12 bar=13 foo=14", "regex", pattern=r"foo=(\d+)") == "14"
    assert extract_answer("foo=12 bar=13", "regex", pattern=r"bar=\d+") == "bar=13"
    assert extract_answer("nothing", "regex", pattern=r"foo=(\d+)") is None
    assert extract_answer("<sol>\n9\n</sol>", "regex", pattern=r"<sol>(.*?)</sol>") == "9"  # DOTALL
    assert extract_answer("a=1", "regex", pattern=re.compile(r"a=(\d)")) == "1"
    assert extract_answer("a=", "regex", pattern=r"a=(\d)?") is None  # empty/unmatched group: no answer


@pytest.mark.parametrize(
    "text, expected, method",
    [
        (UNSLOTH, "72", "answer_tag"),
        ("<answer>5</answer>\n#### 5", "5", "answer_tag"),  # tag beats ####
        ("<answer>5</answer>\n#### 6", "5, 6", None),  # two explicit answers that differ: a hedge
        (GSM8K, "72", "gsm8k"),
        ("#### Step 6\nwork\n\\boxed{7}", "7", "boxed"),  # a #### heading before a box is not the answer
        ("#### 6\n\\boxed{7}", "6, 7", None),  # a #### answer and a box that differ: a hedge
        ("\\boxed{7}\n#### 7", "7", "gsm8k"),
        ("\\boxed{7}\nAnswer: 8", "7", "boxed"),  # boxed beats Answer:
        ("work\nAnswer: 8 apples\nthe end 9", "8 apples", "answer_prefix"),
        ("I think it is 9 or maybe 10", "9 or maybe 10", "last_number"),  # a disjunction: no number
        ("nothing numeric", None, None),
        ("<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n", None, None),  # cut off: no fallback to the 7
        ("<answer></answer>\n#### 7", None, None),  # an empty tagged answer is no answer
        ("", None, None),
    ],
)
def test_auto_order(text, expected, method):
    assert extract_answer(text) == expected
    if method:
        assert extract_answer(text, method) == expected
        earlier = AUTO_ORDER[: AUTO_ORDER.index(method)]
        assert all(extract_answer(text, m) in (None, expected) or m == "gsm8k" for m in earlier)


def test_bad_parameters():
    with pytest.raises(ValueError, match="unknown extract method 'xml'"):
        extract_answer("x", "xml")
    with pytest.raises(ValueError, match="needs a 'pattern'"):
        extract_answer("x", "regex")
    with pytest.raises(ValueError, match="not a valid regular expression"):
        extract_answer("x", "regex", pattern="(")
    with pytest.raises(ValueError, match="unknown extract method"):
        check_extraction("boxd", None)
    with pytest.raises(ValueError, match="needs a 'pattern'"):
        check_extraction("regex", None)
    with pytest.raises(ValueError, match="only used with extract = 'regex'"):
        check_extraction("auto", r"(\d+)")
    assert check_extraction("regex", r"(\d+)").pattern == r"(\d+)"
    assert all(check_extraction(m, None) is None for m in METHODS if m != "regex")


def test_long_junk_is_fast():
    import time

    junks = [
        ("<answer>" + "{" * 5000 + "\\boxed{" + "9" * 5000 + "####" * 1000) * 4,
        "Answer: x" + " " * 20000 + "y",  # a lazy group before trailing spaces would be quadratic
        "Answer: x" + "*" * 20000 + "y",
        "- " * 20000 + "<answer>" * 5000,
    ]
    start = time.perf_counter()
    for junk in junks:
        for method in METHODS[:-1]:
            extract_answer(junk, method)
    assert time.perf_counter() - start < 5.0  # linear-time regexes: milliseconds in practice


# Chat models write Markdown and reasoning blocks: none of it may take the place of the answer.
@pytest.mark.parametrize(
    "text, expected",
    [
        ("#### Step 1: add\n3 + 4 = 7\n#### Step 2: check\nSo 7 it is.", "7"),  # headings are not answers
        ("#### Step 1: add\nThe sum is 7.", "7"),
        ("#### Final answer: 7", "7"),
        ("Work.\n**Final answer: 7**", "7"),
        ("**Final Answer**\n\n7", "7"),
        ("The **final answer** is **7**.", "7"),
        ("The answer is 7.\na: 3", "7"),  # a variable line "a: 3" is not an answer
        ("Answer: 8\nthen, checking, the final answer is 9", "9"),  # "final answer" outranks "answer"
        ("The final answer is $\\frac{1}{3}$", "$\\frac{1}{3}$"),
        ("so we get \\frac{1}{3}", "\\frac{1}{3}"),
        ("It is 1 000 000", "1 000 000"),
        ("We got 5 on 2023-05-01", "5"),
        ("We got 5 at 12:30", "5"),
        ("We got 5, which is 2^10 smaller", "5"),
        ("We got 5 from x_2", "5"),
        ("The answer is 7.\n\n1. Note the units", "7"),  # a list marker is not a number
        ("<think>maybe <answer>5</answer></think> The answer is 7.", "7"),
        ("<think>draft <answer>5</answer></think>\n<answer>7</answer>", "7"),
        ("<think>the answer is 5, \\boxed{5}", None),  # cut off while thinking: no answer
        ("the prompt opened the block: 5</think> so 6", "6"),
        ("The total is 42. Let me verify the answer is correct.", "42"),
    ],
)
def test_auto_is_not_hijacked_by_markdown_or_reasoning(text, expected):
    assert extract_answer(text) == expected


def test_last_number_finds_only_literals_of_the_number_grammar():
    from grpo_rewards.answers.numbers import parse_literal

    pieces = ["1,234", "-5", "1 000", "\\frac{2}{3}", "50%", "1e3", "$7", "3/4", "1 000 000", "1e-3"]
    for piece in pieces:
        assert extract_answer(f"so it is {piece} in the end", "last_number") == piece
        assert parse_literal(piece) is not None


@pytest.mark.parametrize(
    "text, expected",
    [
        # Math-Verify's test_math_extraction_additional_cases[17]: a boxed intermediate result, then the final answer
        ("so the interest is $\\boxed{255}$. After six months Dr. Zaius has $10,200 + $255 = $10,455. "
         "Final Answer: The final answer is $10,455$. I hope it is correct.", "$10,455$"),
        ("\\boxed{3}\n\n**Final Answer**\n7", "7"),
        ("Final answer: 5. Wait, that is wrong: \\boxed{6}", "6"),  # the box comes after: it wins
        ("The final answer is $\\boxed{7}$.", "7"),
        ("\\boxed{7}\nAnswer: 8", "7"),  # only a *final* answer after the box beats it
    ],
)
def test_auto_final_answer_after_the_last_box_wins(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("located between $\\boxed{12 $ and $13 }. $", "12 \\text{ and }13"),  # Math-Verify's latex_notation_math[4]
        ("\\boxed{$42$}", "$42$"),  # a box written in text mode keeps its math
        ("\\boxed{x $ for all $ x > 0}", "x \\text{ for all } x > 0"),
    ],
)
def test_dollar_signs_inside_a_box_leave_math_mode(text, expected):
    assert extract_answer(text, "boxed") == expected


def test_an_escaped_dollar_in_a_box_is_a_dollar_sign():
    assert extract_answer("worth $\\boxed{\\$16,\\!386.20}$ at the end", "boxed") == "\\$16,\\!386.20"
