"""The grammar's table of forms: each row a completion, a reference and whether the reward pays it.

``docs/answers.md`` shows these rows in its generated part (:func:`render`; ``python -m
grpo_rewards.answers.forms`` rewrites it), and ``tests/rewards/test_answer_forms.py`` scores every row with
its reward and checks the committed page, so the page can drift neither from the grammar nor from this
table. A row's reward is built with ``value = 1`` and ``wrong_value = 0`` (``numeric_proximity`` in its
tiered mode, 1 for the exact tier and 0 for every other).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

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
)

BEGIN = "<!-- generated from grpo_rewards/answers/forms.py by: python -m grpo_rewards.answers.forms -->"
END = "<!-- end of the generated part -->"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "answers.md"


def _cell(text: str) -> str:
    code = text.replace("\n", "⏎").replace("|", "\\|")
    return f"`` {code} ``" if "`" in code else f"`{code}`"


def render() -> str:
    """The generated part of ``docs/answers.md``: one table per section of :data:`FORMS`."""
    lines = [BEGIN, ""]
    for section in dict.fromkeys(f.section for f in FORMS):
        lines += [f"### {section}", "", "| completion | reference | reward | paid | why |", "|---|---|---|---|---|"]
        lines += [f"| {_cell(f.completion)} | {_cell(f.reference)} | {f.reward} | {'yes' if f.paid else 'no'} | "
                  f"{f.note} |" for f in FORMS if f.section == section]
        lines.append("")
    return "\n".join([*lines, END])


def write(page: Path = PAGE) -> None:
    """Replace the generated part of ``page`` with :func:`render` (atomically)."""
    text = page.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    with atomic_write(page) as out:
        out.write(text[:start] + render() + text[end:])


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
