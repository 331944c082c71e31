"""Every pass of the answer grammar is linear: 1 MB completions of every shape that makes a parser backtrack
(unclosed fences and tags, deep nesting, long digit runs, repeated markers) are scored by every built-in
reward and every reward of the repository's plugins in under a second each.

A quadratic pass takes minutes on these inputs (an unclosed code fence of 40 kB took 14 s), so the bound
separates linear from quadratic on any machine. The time is this process's CPU time, so that a machine
busy with other work does not fail the test; each reward is called once on a small completion first, so
that starting its worker processes is not counted (``math_equivalence``'s workers see only the extracted
answer, capped at ``MAX_ANSWER_CHARS``).
"""

from __future__ import annotations

import contextlib
import time

import pytest

from grpo_rewards import get_registry, reward
from grpo_rewards.sandbox.extract import extract_code

MB = 1 << 20


def _fill(unit: str, head: str = "", tail: str = "") -> str:
    return head + unit * ((MB - len(head) - len(tail)) // len(unit)) + tail


SHAPES: dict[str, str] = {
    "unclosed code fence": _fill("x = 1\n", "```python\n"),
    "many unclosed fences": _fill("```\n"),
    "fence lines with blanks": _fill(" \t", "```json "),
    "unclosed answer tags": _fill("<answer>"),
    "unclosed answer tag, then text": _fill("12 ", "<answer>"),
    "half tags": _fill("<answer"),
    "unclosed think": _fill("the answer is 12. ", "<think>"),
    "lone closing tags": _fill("</think>"),
    "nested boxes": _fill("\\boxed{"),
    "nested braces": _fill("{"),
    "nested brackets": _fill("["),
    "nested parentheses": _fill("("),
    "nested fractions": _fill("\\frac{1}{"),
    "digit run": _fill("1"),
    "grouped digits": _fill("1,"),
    "decimal commas in context": _fill("3,5 ", "La respuesta es "),
    "grouped decimal commas": _fill("1.234,5 "),
    "comma digit runs": _fill("1,2"),
    "spaced digits": _fill("1 "),
    "decimals": _fill("1.1"),
    "exponents": _fill("1e"),
    "final answer lines": _fill("Final answer: 12\n"),
    "answer phrases": _fill("The answer is "),
    "answer phrases with numbers": _fill("the answer is 12 or "),
    "gsm8k markers": _fill("#### "),
    "boxes": _fill("\\boxed{1}"),
    "dollar signs": _fill("$"),
    "math spans": _fill("$1$ "),
    "revisions": _fill("but wait, actually "),
    "negations": _fill("not 12, "),
    "quotes": _fill('"'),
    "option letters": _fill("(A) 1 "),
    "whitespace": _fill(" "),
    "newlines": _fill("\n"),
    "CJK": _fill("答案是"),
    "json-like": _fill('{"a": '),
}

COLUMNS = {"answer": "12", "schema": '{"type": "object"}', "language": "python",
           "keywords": ["invoice"], "ideal": "Dear Jane", "recipient": "Jane Smith"}
NEEDS_A_SANDBOX = {"code_execution", "code_execution_binary"}  # their extraction is checked below
# a model of the run's scores at most its max_length tokens of a completion (tests/core/test_reward_model_builtin.py)
NEEDS_A_MODEL = {"reward_model"}
PARAMS = {"math_equivalence": {"workers": 1}, "cosine_scaled": {}}
JUDGES = {"llm_judge", "pairwise_judge"}  # rendered into a prompt and sent to a scripted local judge (same process)


def _rewards() -> list[str]:
    return sorted(set(get_registry().rewards) - NEEDS_A_SANDBOX - NEEDS_A_MODEL)


@pytest.fixture(scope="module", params=_rewards())
def scorer(request: pytest.FixtureRequest):
    from grpo_rewards.judges.scripted import ScriptedEndpoint

    with ScriptedEndpoint() if request.param in JUDGES else contextlib.nullcontext() as endpoint:
        params = {"model": "judge", "base_url": endpoint.base_url, "question": "Right?"} if endpoint else PARAMS.get(request.param, {})
        fn = reward(request.param, **params)
        spec = get_registry().rewards[request.param]
        columns = {c: [COLUMNS[c]] for c in spec.columns if c in COLUMNS}
        columns["prompts"] = ["What is 5 + 7?"]  # as TRL passes it to every reward (group rewards group by it)
        fn(["<answer>12</answer>"], **columns)  # warm: worker processes start here, not in the timed call
        yield request.param, fn, columns


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_reward_reads_a_megabyte_in_under_a_second(scorer, shape: str) -> None:
    name, fn, columns = scorer
    start = time.process_time()
    fn([SHAPES[shape]], **columns)
    took = time.process_time() - start
    assert took < 1.0, f"{name} took {took:.2f} s on 1 MB of {shape}"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_code_extraction_reads_a_megabyte_in_under_a_second(shape: str) -> None:
    start = time.process_time()
    extract_code(SHAPES[shape])
    assert time.process_time() - start < 1.0
