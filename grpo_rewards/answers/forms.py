"""The grammar's table of forms, and ``docs/answers.md`` written from it.

:data:`FORMS`: each row a completion, a reference and whether the reward pays it; :data:`READINGS`: each row
literals and the value the number grammar reads in each. ``docs/answers.md`` is this module's
:func:`render` in full (``python -m grpo_rewards.answers.forms`` rewrites it), and
``tests/rewards/test_answer_forms.py`` scores every row with its reward, reads every literal and checks that
the committed page is the rendered one, so the page can drift neither from the grammar nor from this table.
A row's reward is built with ``value = 1`` and ``wrong_value = 0`` (``numeric_proximity`` in its tiered mode,
1 for the exact tier and 0 for every other).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

from grpo_rewards.answers.numbers import format_number, parse_literal
from grpo_rewards.files import atomic_write


class Form(NamedTuple):
    """One row: ``completion`` scored by ``reward`` against ``reference`` pays (``paid``) or not; ``note`` says why."""

    section: str
    completion: str
    reference: str
    paid: bool
    note: str
    reward: str = "exact_match"


FORMS: tuple[Form, ...] = (
    Form("Numbers", "She finished 3rd.", "3", True, "an ordinal is its number (the suffix must fit: `3th` is none)"),
    Form("Numbers", "The city has 1.2 million people.", "1200000", True, "scale words after digits"),
    Form("Numbers", "<answer>12 percent</answer>", "12%", True, "`percent`, `per cent` are `%`"),
    Form("Numbers", "So we get $\\tfrac12$.", "0.5", True, "`\\frac {1}{2}`, `\\tfrac12` in prose"),
    Form("Numbers", "\\boxed{\\boldsymbol{12}}", "12", True, "`\\boldsymbol`, `\\bm`, `\\mathit` peeled"),
    Form("Numbers", "\\boxed{0.\\overline{3}}", "1/3", True, "a repeating decimal"),
    Form("Numbers", "It takes 3½ cups.", "7/2", True, "unicode fractions"),
    Form("Numbers", "<answer>x = 12</answer>", "12", True, "the value of one variable"),
    Form("Numbers", "<answer>12 kg</answer>", "12kg", True, "a unit glued to its number or not"),
    Form("Numbers", "La respuesta es 3,5.", "3.5", True,
         "a decimal comma in a text with a decimal-comma context (an answer or result word of Spanish, French, "
         "German, Portuguese, Italian or Russian)"),
    Form("Numbers", "The answer is 3,5.", "3.5", False,
         "without that context `3,5` is a decimal or a list: no number"),
    Form("Numbers", "The answer is 3,5.", "3", False, "and never its `3` or its `5`"),
    Form("Numbers", "Die Antwort ist 1,234.", "1234", True, "a group of three after a comma is thousands in any text"),
    Form("Numbers", "We get 1.234,5 m.", "1234.5", True, "after thousands groups of dots or spaces a comma is decimal"),
    Form("Numbers", "\\boxed{3{,}5}", "3.5", True, "LaTeX `{,}` is a decimal comma unless a group of three follows"),
    Form("Numbers", "<answer>0</answer>", "3e-7", False, "tiny quantities keep `precision` significant digits",
         "math_equivalence"),
    Form("Numbers", "<answer>3e-9</answer>", "3e-7", False, "", "math_equivalence"),
    Form("Numbers", "<answer>3.0000001e-7</answer>", "3e-7", True, "", "math_equivalence"),
    Form("Model families", "Final Answer: The final answer is $\\$18$. I hope it is correct.", "18", True,
         "Minerva"),
    Form("Model families", "<think>\nLet me add.\n</think>\n\n**Final Answer**\n\\[\n\\boxed{12}\n\\]", "12", True,
         "DeepSeek-R1 distills"),
    Form("Model families", "The final answer is: $\\boxed{12}$", "12", True, "Llama 3"),
    Form("Model families", "<answer>The answer is 12.</answer>", "12", True, "a sentence inside the tag"),
    Form("Model families", "```python\nanswer = 9 * 2\nprint(answer)\n```", "18", True,
         "program of thought: arithmetic on literals evaluated over the AST, never run"),
    Form("Hedges", "The answer is 12–13.", "12", False, "an en-dash range"),
    Form("Hedges", "The answer is at least 12.", "12", False, "a bound (`at least`, `more than`, `≥`)"),
    Form("Hedges", "The answer is 12 (or 13 if we count the cat).", "12", False, "an alternative in parentheses"),
    Form("Hedges", "<answer>12</answer>\nSo \\boxed{13}", "12", False, "explicit answers of two kinds that differ"),
    Form("Hedges", "#### 12\n\\boxed{13}", "13", False, ""),
    Form("Hedges", "The answer is \\boxed{12}. Wait, actually the answer is 13.", "12", False,
         "a box, then a revision"),
    Form("Not the answer", 'He said "the answer is 12", but counting again it is 15.', "15", True,
         "a claim in quotation marks is someone's"),
    Form("Not the answer", "So she has 12 apples.\n\nP.S. This took me 3 steps.", "12", True,
         "a postscript's numbers are an aside"),
    Form("Not the answer", "I will put the answer in <answer> tags.\n<answer>12</answer>", "12", True,
         "a tag named in a sentence is no answer, and no hedge"),
    Form("Not the answer", "<reasoning>The answer is 12.</reasoning> I cannot answer this.", "12", False,
         "the reasoning block (`<think>`, `<thinking>`, `<reasoning>`) is never an answer"),
    Form("Finding the answer", "<answer>12</answer>", "12", True, "the tag"),
    Form("Finding the answer", "<answer>**12**</answer>", "12", True, "emphasis peeled"),
    Form("Finding the answer", '<answer class="final">12</answer>', "12", True, "attributes allowed"),
    Form("Finding the answer", "<answer>11</answer>\n<answer>12</answer>", "12", False,
         "two tags, two boxes, two `####` lines, two `Final answer:` or `Answer:` lines that differ: a hedge, "
         "their list"),
    Form("Finding the answer", "\\boxed{11} and \\boxed{12}", "12", False, ""),
    Form("Finding the answer", "#### 12\n#### 12.0", "12", True, "the same answer restated is one answer"),
    Form("Finding the answer", "Final answer: 12\nFinal answer: twelve", "12", True, ""),
    Form("Finding the answer", "The answer is 12 or 13.", "12", False, "a disjunction or a range: the text itself"),
    Form("Finding the answer", "It is between 10 and 14.", "12", False, ""),
    Form("Finding the answer", "It takes 3 to 4 hours.", "4", False, ""),
    Form("Finding the answer", "The answer is 0.5, or 1/2.", "0.5", True, "one value restated"),
    Form("Finding the answer", "I first thought the answer was 30, but recounting the total is 36.", "36", True,
         "a revision (\"but\", \"actually\", \"wait\", \"after checking\", \"on second thought\", ...) replaces the "
         "announced answer with the one committed to after it (\"the total/result/answer is ...\", \"it's ...\")"),
    Form("Finding the answer", "The answer is 12. Wait, let me verify: 4 + 8 = 12, and 12 - 4 = 8.", "12", True,
         "checking work commits to nothing new"),
    Form("Finding the answer", "So there are 21 marbles, not 24.", "21", True, "a negated number is skipped"),
    Form("Finding the answer", "I got 19, and 23 is wrong.", "19", True, ""),
    Form("Finding the answer", "Answer: 12\nBut actually the total is 13.", "12", True,
         "`Final answer: X`, `Answer: X` lines are explicit markers: a revision in prose does not override them"),
    Form("Finding the answer", "La respuesta final es 12.", "12", True, "other languages' answer words"),
    Form("Option letters", "A: 7, B: 12, C: 15. I pick B.", "B", True, "a letter reference: the letter"),
    Form("Option letters", "A: 7, B: 12, C: 15. I pick B.", "12", True, "any other reference: the option's text"),
    Form("Option letters", "(A) 7 (B) 12\nThe answer is (B).", "12", True, ""),
    Form("Option letters", "<answer>(B)</answer>", "B", True, ""),
    Form("Option letters", "(B)", "B", True, "a completion that is only the letter"),
    Form("math_equivalence", "\\boxed{8 km}", "8 m", False,
         "a unit of the reference's kind is needed, and the same quantity", "math_equivalence"),
    Form("math_equivalence", "\\boxed{250 m}", "0.25 km", True,
         "an equal quantity in another unit of the table (`grpo_rewards/answers/units.py`)", "math_equivalence"),
    Form("math_equivalence", "\\boxed{4 \\text{ minutes}}", "4 hours", False, "", "math_equivalence"),
    Form("math_equivalence", "\\boxed{7\\text{ cm}^2}", "7\\text{ cm}^3", False, "another dimension",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{3}", "3 hours", False, "the reference has a unit, the answer none",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{12}", "12", True, "a reference without a unit checks no unit",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{5\\text{ pears}}", "5\\text{ apples}", False,
         "a unit the table does not know must be written the same", "math_equivalence"),
    Form("math_equivalence", "\\boxed{\\sqrt{3} = \\sqrt{2}}", "\\sqrt{2}", False, "a false relation",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{6 \\cdot 7 = 41}", "41", False, "a false relation ending in the reference",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{6 \\cdot 7 = 42}", "42", True, "a true relation is its last side",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{x = 9}", "9", True, "an assignment", "math_equivalence"),
    Form("math_equivalence", "<answer>maybe $\\sqrt{5}$, though $\\sqrt{6}$ could be right</answer>", "\\sqrt{5}",
         False, "several different math spans in prose: a hedge", "math_equivalence"),
    Form("math_equivalence", "<answer>it is $\\sqrt{5}$, which is $5^{1/2}$</answer>", "\\sqrt{5}", True,
         "one value restated", "math_equivalence"),
    Form("math_equivalence", "\\boxed{4\\frac{2}{3}}", "\\frac{14}{3}", True, "mixed numbers on either side",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{0.0833333333333333}", "\\frac{1}{12}", True,
         "precision rule: a decimal is rounded to `precision` places (6)", "math_equivalence"),
    Form("math_equivalence", "\\boxed{0.0833}", "\\frac{1}{12}", False, "", "math_equivalence"),
    Form("math_equivalence", "\\boxed{\\sqrt{19}}", "4.358898943540674", True,
         "`require_literal`: a simplest exact form", "math_equivalence"),
    Form("math_equivalence", "\\boxed{\\left( \\frac{2}{9} \\right)}", "2/9", True, "", "math_equivalence"),
    Form("math_equivalence", "\\boxed{\\sqrt{25}}", "5", False, "arithmetic left undone", "math_equivalence"),
    Form("math_equivalence", "\\boxed{19 \\cdot 3 + 2}", "59", False, "", "math_equivalence"),
    Form("math_equivalence", "\\boxed{3^{4}}", "81", False, "", "math_equivalence"),
    Form("math_equivalence", "\\boxed{\\sqrt{12}}", "3.4641016151377544", False, "`2\\sqrt{3}` is its simplest form",
         "math_equivalence"),
    Form("math_equivalence", "\\boxed{y = 3, y = \\frac{1 \\pm \\sqrt{5}}{2}}", "y = 3, y = \\frac{1 \\pm \\sqrt{5}}{2}",
         True, "a list of solutions is the set of its values (`\\pm` gives two)", "math_equivalence"),
    Form("math_equivalence", "\\boxed{y = 3}", "y = 3, y = \\frac{1 \\pm \\sqrt{5}}{2}", False, "",
         "math_equivalence"),
)


class Reading(NamedTuple):
    """Literals (``written``) and what the number grammar reads in each (``values``: the value as
    :func:`shown` writes it, ``None`` for no number); ``read_as`` replaces the values in the page's column."""

    written: tuple[str, ...]
    values: tuple[str | None, ...]
    note: str
    read_as: str = ""


READINGS: tuple[Reading, ...] = (
    Reading(("72", "72.0", "72.", "+72"), ("72",) * 4, ""),
    Reading(("1,234", "1 234", "1{,}234", "1\\,234"), ("1234",) * 4, "thousands groups of three"),
    Reading(("1,23,456", "12,34,56,789"), ("123456", "123456789"), "Indian digit grouping"),
    Reading(("1.234",), ("1.234",), "`.` alone is always a decimal point"),
    Reading(("1.234,5", "1 234,5", "12.345.678,9"), ("1234.5", "1234.5", "12345678.9"),
            "a decimal comma after thousands groups of dots or spaces"),
    Reading(("3{,}5", "1{,}234"), ("3.5", "1234"), "LaTeX `{,}`: thousands before a group of three, else decimal"),
    Reading(("1,22", "12,34", "3,5"), (None, None, None),
            "a decimal comma or a list: a decimal only in a text with a decimal-comma context (below); "
            "`math_equivalence` compares a list as a set"),
    Reading(("$12", "\\$12", "€12", "£12", "¥12", "₹12", "₩12", "₽12", "₺12", "₦12", "₱12", "₫12"), ("12",) * 12,
            "a currency symbol before the number"),
    Reading(("12€", "1,000.99$"), ("12", "1000.99"), "a currency symbol after it"),
    Reading(("USD 12", "12 USD", "EUR 3.50", "Rs. 80", "INR 7,50,000"), ("12", "12", "3.5", "80", "750000"),
            "an ISO code (or `Rs`) before or after"),
    Reading(("1.5e3", "1.5E-3"), ("1500", "0.0015"), "exponent up to 400"),
    Reading(("6.02 \\times 10^{23}", "2.5\\cdot 10^4", "4×10^3", "2 x 10^-3"),
            ("602000000000000000000000", "25000", "4000", "0.002"), "", "scientific notation"),
    Reading(("10^{3}", "2^{10}"), (None, None), "a power is arithmetic left undone"),
    Reading(("3/4", "\\frac{3}{4}", "\\frac34", "\\dfrac{3}{4}", "\\tfrac{3}{4}", "-\\frac{1}{2}"),
            ("0.75",) * 5 + ("-0.5",), "fractions"),
    Reading(("3\\frac{1}{2}", "3 \\frac12", "3 1/2", "3 125/200"), ("3.5", "3.5", "3.5", "15.625"),
            "mixed numbers (a proper fraction; `3 125/200` stays 3125/200)"),
    Reading(("2\\frac{5}{4}", "2 5/4"), (None, None), "an improper fraction after a whole number"),
    Reading(("50%", "50\\%", "50 percent"), ("50%",) * 3, "equals `50` and `0.5` (the percent rule)"),
    Reading(("(10)", "\\left( \\frac{1}{3} \\right)"), ("10", "1/3"), "parentheses around one number"),
    Reading(("**12**", "__12__", "*12*", "\\textbf{12}", "\\boxed{12}", "$12$"), ("12",) * 6,
            "emphasis and wrappers peeled"),
    Reading(("twelve", "forty-two", "forty two", "a hundred and one", "two thousand twenty-four", "negative eight",
             "a dozen"), ("12", "42", "42", "101", "2024", "-8", "12"), "English words, a whole answer only"),
    Reading(("three quarters", "third", "siete"), (None,) * 3, "fractions, ordinals and other languages' words"),
    Reading(("٣", "７２", "²"), (None,) * 3, "ASCII digits only"),
    Reading(("17*23+5", "x + 1", "2023-05-01", "12:30", "72 apples"), (None,) * 5,
            "arithmetic, algebra, dates, times, words"),
)


def shown(written: str) -> str | None:
    """What the number grammar reads in ``written``, as :data:`READINGS` writes it (``50%``, ``1/3``, ``-0.5``)."""
    number = parse_literal(written)
    return None if number is None else format_number(number.value) + ("%" if number.percent else "")


INTRO = """# How an answer is read

Every reward that compares an answer with a reference reads it the same way: the extraction
(`grpo_rewards/answers/extraction.py`, `grpo_rewards/answers/prose.py`) finds the answer in the completion, the
number grammar (`grpo_rewards/answers/numbers.py`, `grpo_rewards/answers/number_words.py`) says whether it is a
number and which, and `math_equivalence` adds units and relations (`grpo_rewards/answers/units.py`,
`grpo_rewards/builtins/math_check.py`). Each table row is a completion with its outcome against the reference
shown, scored by the reward the row names (default parameters, `value = 1`).

This page is written in full from the grammar's own table (`grpo_rewards/answers/forms.py`: `python -m
grpo_rewards.answers.forms` rewrites it), and `tests/rewards/test_answer_forms.py` scores every row with its
reward, reads every literal with the number grammar and checks that this page is the rendered one, so neither
can drift. The reasoning block is never an answer for any reward (`<think>`, `<thinking>`, `<reasoning>`;
code and JSON rewards too), and `grpo_rewards.testing.metamorphic` checks the grammar's properties over
generated golds (`tests/rewards/test_metamorphic.py`; `grpo rewards check NAME` runs them over any reward).

## The grammar's forms
"""

NUMBERS = """## Numbers

Each literal below is read alone, as an answer (`parse_literal`); the tests read every one.
"""

NUMBERS_AFTER = """In prose (`last_number`) only digits count: `she needs 2\\frac{1}{4} cups` gives `2\\frac{1}{4}`,
`3.84 \\times 10^{5} km` gives `3.84 \\times 10^{5}`, `45,00,000 rupees` gives `45,00,000`; words
(`one of them`) are never read as numbers there.

Tests: `tests/rewards/test_number_grammar.py`, `tests/rewards/test_normalize.py`."""

FINDING = """## Finding the answer

`auto` tries, in order: the `<answer>` tag (attributes allowed: `<answer class="final">`), the `####`
line, the `\\boxed{}`, an answer announced in words, the last number. One rule for several answers: explicit
markers that differ are a hedge; in prose the last committed answer counts.
"""

FINDING_AFTER = """Languages: `Final answer` / `Answer` lines and "the answer is" also read `Respuesta final`,
`Réponse finale`, `Endgültige Antwort`, `Resposta final`, `Risposta finale`, `Окончательный ответ`,
`最终答案` and `respuesta / réponse / Antwort / resposta / risposta / ответ / 答案` with `es / est / ist /
é / è / 是 / 为`; a text with the English word "answer" is read in English only. Revisions also know
`pero`, `mais`, `aber`, `porém`, `però`, `но`, `但是`, `不过`, `其实`.

Tests: `tests/rewards/test_prose_answers.py`, `tests/rewards/test_extraction.py`,
`tests/rewards/test_answers_from_token_ids.py` (the same rows decoded from SmolLM2 token ids)."""

OPTIONS = """## Option letters

After an option list (`A: 7, B: 12`, `(A) 7 (B) 12`, one `A) ...` a line), "I pick B", "I'd go with B",
"option B", "the answer is (B).", `Answer: B`, `<answer>(B)</answer>` or a completion that is only `(B)`
answers with the letter. The letter carries its option's text: against a letter reference (`B`) the letter
is compared, against any other reference (`12`) the option's text. An option list alone answers nothing
(`A: 7, B: 12` gives the last number, 12, only through `last_number`).
"""

MATH = """## math_equivalence
"""

MATH_AFTER = """Parameters: `precision` (math-verify's `float_rounding`, 0 to 15), `match_types` (`["latex", "expr"]`),
`strict`, `allow_set_relation_comp`, each as math-verify defines it.

Tests: `tests/rewards/test_math_rules.py`, `tests/rewards/test_math_equivalence.py`, and Math-Verify's own
cases in `tests/conformance` ([conformance.md](conformance.md))."""

GRADERS = """## The evaluation harnesses' graders

`tests/conformance/cases/lm_eval.json`, `simple_evals.json` and `qwen_math.json` hold one GSM8K problem answered in the published
answer format of each model family users train (Qwen2.5-Math's box, DeepSeek-R1's `<think>` then a box,
Llama 3's `The final answer is: $\\boxed{18}$`, Minerva's sentence, lm-eval's `The answer is 18.` as Mistral
follows it, Phi's bold final answer, this repository's SmolLM2 tags, GSM8K's `####`), rightly and wrongly, each
with the verdict of a grader's own code at a pinned commit (`tests/conformance/tools/transcribe_graders.py`):
lm-evaluation-harness's gsm8k filters with its `exact_match` metric and minerva_math's `math_verify` score,
simple-evals' MGSM grader, and Qwen2.5-Math's `extract_answer` and `math_equal`. `exact_match` agrees with
lm-eval's `flexible-extract`, minerva_math's `math_verify` and Qwen2.5-Math's grader on every case, and pays
no wrong answer any grader refuses. It differs on purpose where a grader
reads one format only: lm-evaluation-harness's gsm8k `strict-match` reads only a `#### N` line;
simple-evals' MGSM grader reads the last number after the last `Answer` (capitalised), so it refuses a box or
"The answer is 18." that `exact_match` pays; minerva_math's `exact_match` reads only Minerva's sentence (not
transcribed here: it needs sympy's LaTeX parser with antlr4 4.11, which conflicts with the antlr4 the toolkit
installs).
"""

PROBES = """## Probes

`grpo rewards check NAME` scores each trick of `grpo_rewards/hacking.py` against an honest wrong answer;
the answer-grammar tricks are a disjunction or a range in prose, a disjunction in the tag, two different
`####` or final-answer lines, two different math spans in prose, a false equation ending in the reference,
arithmetic left undone, a revision that retracts the right answer into a hedge, and the right answer
negated. No built-in loses to any of them (`tests/kit/test_builtins_not_hacked.py`). Among the plugins'
rewards, `cosine_scaled` (grpo-rewards-reasoning) scores two of the tricks a hair above the honest wrong
answer (`two different math spans in prose` and `the answer repeated in every form`: -0.9889 and -0.9896
against -0.9909): their wrong answers are longer in distinct words, which its length rule pays a wrong
answer for; the answer itself is read as wrong."""

PAGE = Path(__file__).resolve().parents[2] / "docs" / "answers.md"
FORM_SECTIONS = ("Numbers", "Model families", "Hedges", "Not the answer")


def _cell(text: str) -> str:
    code = text.replace("\n", "⏎").replace("|", "\\|")
    return f"`` {code} ``" if "`" in code else f"`{code}`"


def _forms_table(section: str) -> list[str]:
    lines = ["| completion | reference | reward | paid | why |", "|---|---|---|---|---|"]
    lines += [f"| {_cell(f.completion)} | {_cell(f.reference)} | {f.reward} | {'yes' if f.paid else 'no'} | "
              f"{f.note} |" for f in FORMS if f.section == section]
    return [*lines, ""]


def _readings_table() -> list[str]:
    lines = ["| written | read as | note |", "|---|---|---|"]
    for r in READINGS:
        values = [v or "no number" for v in r.values]
        read_as = r.read_as or (values[0] if len(set(values)) == 1 else ", ".join(values))
        lines.append(f"| {', '.join(_cell(w) for w in r.written)} | {read_as} | {r.note} |")
    return [*lines, ""]


def render() -> str:
    """``docs/answers.md`` in full, from :data:`FORMS`, :data:`READINGS` and the text around them."""
    lines = [INTRO]
    for section in FORM_SECTIONS:
        lines += [f"### {section}", "", *_forms_table(section)]
    lines += [NUMBERS, *_readings_table(), NUMBERS_AFTER, "", FINDING, *_forms_table("Finding the answer"),
              FINDING_AFTER, "", OPTIONS, *_forms_table("Option letters"), MATH, *_forms_table("math_equivalence"),
              MATH_AFTER, "", GRADERS, PROBES]
    return "\n".join(lines) + "\n"


def write(page: Path = PAGE) -> None:
    """Write :func:`render` to ``page`` (atomically)."""
    with atomic_write(page) as out:
        out.write(render())


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
