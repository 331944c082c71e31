"""Answers written in prose: revisions, negations, disjunctions and ranges, option letters, explicit markers
that disagree, Markdown and tag attributes (grpo_rewards.answers.extraction, grpo_rewards.answers.prose)."""

import pickle

import pytest

from grpo_rewards import reward
from grpo_rewards.answers.extraction import compared_answer, extract_answer
from grpo_rewards.answers.prose import Choice


@pytest.mark.parametrize(("text", "expected"), [
    ("My first guess was that the answer was 30, but recounting the boxes the total is 36.", "36"),
    ("The answer is 8. Wait, I dropped a carry: the sum is 18.", "18"),
    ("So the answer is 5. Actually, 2 of the cats left, so the count is 3.", "3"),
    ("The answer would be 40. On second thought it's 44.", "44"),
    ("La respuesta es 7, pero después de revisar, el total es... the total is 9.", "9"),
    ("答案是 5，但是 after checking the result is 6", "6"),
])
def test_a_revision_replaces_the_answer_announced_before_it(text, expected):
    assert extract_answer(text) == expected
    assert extract_answer(text, "answer_prefix") == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("The answer is 12. Wait, let me verify: 4 + 8 = 12, and 12 - 4 = 8.", "12"),  # checking is no revision
    ("The answer is 12. But I should double check. Yes.", "12"),  # nothing committed after the "but"
])
def test_checking_work_after_the_answer_keeps_it(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("So there are 21 marbles, not 24.", "21"),
    ("I got 19, and 23 is wrong.", "19"),
    ("It comes to 64 rather than 46", "64"),
])
def test_a_negated_number_is_skipped(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", [
    "The answer is 12 or 13.",
    "The answer is between 10 and 14.",
    "I'd say it is somewhere between 10 and 14.",
    "It takes 3 to 4 hours.",
    "The answer is 6, or maybe 7.",
])
def test_a_disjunction_or_range_is_no_number(text):
    for name in ("exact_match", "numeric_proximity", "integer_format"):
        for ref in ("12", "13", "10", "14", "4", "6", "7", "3"):
            assert reward(name)([text], answer=[ref])[0] in (0.0, None), (name, ref, text)


def test_one_number_restated_is_no_disjunction():
    assert extract_answer("The answer is 0.5, or 1/2.") == "0.5"
    assert reward("exact_match")(["The answer is 0.5 or 1/2."], answer=["1/2"]) == [2.0]


@pytest.mark.parametrize(("text", "gold", "score"), [
    ("#### 72\nchecking...\n#### 73", "73", 0.0),
    ("Final answer: 5\nHmm.\nFinal answer: 6", "6", 0.0),
    ("Answer: 9\n...\nAnswer: 11", "11", 0.0),
    ("#### 72\n#### 72.0", "72", 2.0),  # one answer written twice is one answer
    ("Final answer: 5\nFinal answer: five", "5", 2.0),
    ("\\boxed{3} so \\boxed{3.0}", "3", 2.0),
])
def test_disagreeing_explicit_markers_are_a_hedge(text, gold, score):
    assert reward("exact_match")([text], answer=[gold]) == [score]


@pytest.mark.parametrize(("text", "gold", "score"), [
    ("<answer>**12**</answer>", "12", 2.0),
    ("<answer>__12__</answer>", "12", 2.0),
    ("<answer>*Paris*</answer>", "Paris", 2.0),
    ('<answer class="final">12</answer>\nI checked it in 3 steps.', "12", 2.0),
    ("<answer id='a1'>\n12\n</answer>", "12", 2.0),
    ('<answer class="final">11</answer>', "12", 0.0),
    ('<answer x="1">11</answer><answer>12</answer>', "12", 0.0),  # two tags that differ: a hedge
])
def test_markdown_and_tag_attributes(text, gold, score):
    assert reward("exact_match")([text], answer=[gold]) == [score]


OPTIONS = "Options: A: 7, B: 12, C: 15. Counting again, B fits. I pick B"


@pytest.mark.parametrize(("text", "gold", "score"), [
    (OPTIONS, "B", 2.0),
    (OPTIONS, "12", 2.0),
    (OPTIONS, "7", 0.0),
    (OPTIONS, "A", 0.0),
    ("(A) 3 (B) 4 (C) 5\nThe answer is (C).", "C", 2.0),
    ("(A) 3 (B) 4 (C) 5\nThe answer is (C).", "5", 2.0),
    ("The answer is B.", "B", 2.0),
    ("(B)", "B", 2.0),
    ("<answer>(B)</answer>", "B", 2.0),
    ("A) red\nB) blue\nI choose A.", "red", 2.0),
    ("A: 7, B: 12", "7", 0.0),  # an option list alone answers nothing
])
def test_option_letters(text, gold, score):
    assert reward("exact_match")([text], answer=[gold]) == [score]


def test_a_choice_is_a_letter_that_carries_its_option():
    found = extract_answer(OPTIONS)
    assert isinstance(found, Choice) and found == "B" and found.option == "12"
    assert compared_answer(found, "12") == "12" and compared_answer(found, "B") == "B"
    again = pickle.loads(pickle.dumps(found))
    assert again == "B" and again.option == "12"


def test_numeric_proximity_reads_prose_the_same_way():
    fn = reward("numeric_proximity")
    assert fn(["I first thought the answer was 30, but after recounting the total is 36."], answer=["36"]) == [1.0]
    assert fn([OPTIONS], answer=["12"]) == [1.0]
    assert fn(["The answer is 35 or 36."], answer=["36"]) == [0.0]


@pytest.mark.parametrize(("text", "expected"), [  # each ends with another number a last-number read would take
    ("Respuesta final: 14\n(comprobado en 3 pasos)", "14"),
    ("Réponse finale : 14\nVérifié en 2 étapes.", "14"),
    ("最终答案：14\n共 3 步", "14"),
    ("La réponse est 14, trouvée en 2 étapes.", "14"),
    ("答案是 14，用了 3 步", "14"),
    ("Final answer: 14\nFinal answer: 15", "14, 15"),
    ("Respuesta final: 14\nRespuesta final: 15", "14, 15"),
    ("<answer>**٣**</answer>", "٣"),
])
def test_non_english_text(text, expected):
    assert extract_answer(text) == expected
