"""Metamorphic properties of rewards that read answers, checked with hypothesis over generated golds.

For a generated gold (:func:`grpo_rewards.testing.strategies.golds`) and a right form of it:

* **right stays right**: wrapping the right form in any marker, sentence, Markdown or LaTeX wrapper,
  language or model-family template (:func:`~grpo_rewards.testing.strategies.right_completions`; a decimal
  written with a decimal comma in a sentence of a language written with one) scores the reward's full value;
* **wrong stays wrong**: a wrong answer with the right value written where no answer is (a hedge, a
  revision to the wrong value, a quoted or negated claim, a postscript, a draft in the reasoning, an integer
  gold followed by a comma and digits outside a decimal-comma context:
  :func:`~grpo_rewards.testing.strategies.disguised_wrong`) never scores the full value;
* **padding never pays**: no padding of :data:`~grpo_rewards.testing.strategies.PADDINGS` (blank lines,
  spaces, repeated sentences, numbered lists, loops without spaces, CJK loops) repeated 40 or 300 times
  scores more than the completion without it or with its unit once;
* **precision**: a number whose relative difference from the gold is over ``1e-4`` (beyond the
  documented precision, ``10**(1 - precision)`` with ``math_equivalence``'s default 6) never scores the
  full value.

:func:`violations` runs them on one reward and returns what broke, one line each (empty when none).
``tests/rewards/test_metamorphic.py`` runs them over every built-in; ``grpo rewards check NAME`` runs
"wrong stays wrong" and "padding never pays" over any reward, a plugin's included (the other two ask
for the built-ins' grammar and precision, which a plugin need not share).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_rewards.answers.numbers import parse_number
from grpo_rewards.testing.strategies import (
    NUMERIC_KINDS,
    PADDINGS,
    Gold,
    disguised_wrong,
    golds,
    paddings,
    right_completions,
)

PROPERTIES = ("right stays right", "wrong stays wrong", "padding never pays", "precision")
Score = Callable[[str, Gold], float | None]


def _full(score: Score, gold: Gold) -> float | None:
    """What ``<answer>right</answer>`` scores for ``gold``, when it scores more than the wrong answer there."""
    right, wrong = score(f"<answer>{gold.right}</answer>", gold), score(f"<answer>{gold.wrong}</answer>", gold)
    return right if right is not None and wrong is not None and right > wrong else None


def _run(name: str, test: Callable[[], None], out: list[str]) -> None:
    try:
        test()
    except AssertionError as exc:
        out.append(f"{name}: {str(exc).splitlines()[0][:400]}")


def violations(score: Score, *, full: float | None, kinds: tuple[str, ...], examples: int = 50,
               properties: tuple[str, ...] = PROPERTIES) -> list[str]:
    """The properties (module docs) that ``score`` breaks, one line each with hypothesis's smallest example.

    ``score(completion, gold)`` scores one completion against ``gold``; ``full`` is what a right answer
    scores, or ``None`` for a reward whose scale is unknown (a plugin's): then a gold's full score is what
    ``<answer>right</answer>`` scores, and a gold whose right and wrong forms score the same there (a
    reward that does not read that form) is passed over. ``kinds``: the gold kinds the reward reads
    (:data:`~grpo_rewards.testing.strategies.KINDS`)."""
    options = settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                       suppress_health_check=list(HealthCheck))
    out: list[str] = []
    gold_kinds = golds(kinds)

    @options
    @given(st.data())
    def right_stays_right(data: Any) -> None:
        gold = data.draw(gold_kinds)
        completion = data.draw(right_completions(gold))
        got = score(completion, gold)
        assert got == full, f"{completion!r} scored {got} against {gold.reference!r} (a right form)"

    @options
    @given(st.data())
    def wrong_stays_wrong(data: Any) -> None:
        gold = data.draw(gold_kinds)
        top = full if full is not None else _full(score, gold)
        if top is None:
            return
        completion = data.draw(disguised_wrong(gold))
        got = score(completion, gold)
        assert got is None or got < top, f"{completion!r} scored {got} against {gold.reference!r} (wrong)"

    @options
    @given(st.data())
    def padding_never_pays(data: Any) -> None:
        gold = data.draw(gold_kinds)
        plain = data.draw(st.one_of(right_completions(gold), st.just(f"<answer>{gold.wrong}</answer>"),
                                    st.just(f"The answer is {gold.wrong}.")))
        padding = data.draw(paddings())
        pad = PADDINGS[padding]
        before = max((v for v in (score(plain, gold), score(pad(plain, 1), gold)) if v is not None), default=None)
        after = score(pad(plain, data.draw(st.sampled_from([40, 300]))), gold)
        assert before is None or after is None or after <= before + 1e-9, (
            f"{padding} raised {plain!r} from {before} to {after} against {gold.reference!r}")

    numeric = tuple(k for k in kinds if k in NUMERIC_KINDS and k != "percent") if full is not None else ()

    @options
    @given(st.data())
    def precision(data: Any) -> None:
        gold = data.draw(golds(numeric))
        value = parse_number(gold.reference)
        if not value:
            return
        scale = 1 + data.draw(st.sampled_from([1, -1])) * Fraction(data.draw(st.integers(1, 9000)), 10**4)
        answer = f"{float(value * scale):.12e}"
        got = score(f"<answer>{answer}</answer>", gold)
        assert got is None or got < full, f"{answer} scored {got} against {gold.reference} (relative difference {abs(scale - 1)})"

    tests = {"right stays right": right_stays_right, "wrong stays wrong": wrong_stays_wrong,
             "padding never pays": padding_never_pays, "precision": precision}
    for name in properties:
        if name == "precision" and not numeric:
            continue
        _run(name, tests[name], out)
    return out
