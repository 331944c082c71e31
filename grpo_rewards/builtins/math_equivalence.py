"""``math_equivalence`` (reward) and ``math`` (verifier): is the answer mathematically equal to the reference?

The answer is extracted from each completion (``extract``/``pattern``, see
:mod:`grpo_rewards.answers.extraction`; ``extract = "none"`` hands the whole completion to
math-verify, which looks for ``\\boxed{}``, LaTeX and numbers itself), then
compared with the row's reference. Only the extraction reads several answers as a
hedge (a list, see :mod:`grpo_rewards.answers.extraction`): with ``extract = "none"`` math-verify
takes one of them, so several answer tags, or an answer in the reasoning, can win
(``grpo rewards check math_equivalence extract='"none"'`` shows it); train with an
extraction, and keep ``"none"`` for comparing with TRL's and open-r1's ``accuracy_reward``.

* A reference that is a number literal (:mod:`grpo_rewards.answers.numbers`: ``72``,
  ``1,234``, ``0.5``, ``\\frac{3}{4}``, ``3\\frac{1}{2}``, ``50%``) is compared by the number grammar,
  in the calling process, with an answer that is a number literal too (``x = 5``
  counts as 5). ``require_literal`` (on by default) makes any other answer wrong,
  except a simplest exact form: an expression in which sympy, reading it with
  ``evaluate=False``, finds nothing to compute (``\\sqrt{17}`` for ``4.123105625617661``,
  ``\\frac{1+\\sqrt{5}}{2}``), compared by math-verify. Arithmetic left undone is
  refused: ``17*23+5``, ``(9+1)``, ``2^{10}``, ``\\sqrt{16}``, ``2 \\cdot 3\\sqrt{2}`` are not
  the answers 396, 10, 1024, 4 and 6\\sqrt{2}; the policy must do the arithmetic. With
  ``require_literal = false`` such answers go to math-verify. Percentages follow the
  grammar's one rule: ``50%`` equals ``50`` and ``0.5``.
* One precision rule (math-verify's, defined by its ``test_float_precision`` and
  ``test_complex_math_expressions`` cases): a number written with a decimal point is
  rounded, with the value it is compared with, to ``precision`` decimal places (6 by
  default), in the number fast path as in math-verify: ``0.0833333333333333`` is
  ``\\frac{1}{12}`` and ``1.414214`` is ``\\sqrt{2}``, ``0.0833`` and ``1.4142`` are not.
  Numbers written without a decimal point compare exactly (``1/3`` is not ``333/1000``).
* Units (:mod:`grpo_rewards.answers.units`): a reference with a unit (``12 m``, ``3 hours``,
  ``5\\text{ cm}^3``) needs an answer with a unit of the same kind; an equal quantity
  in another unit of the table passes (``0.25 km`` for ``250 m``), another unit or a
  bare number is wrong (``12 km`` for ``12 m``, ``cm^2`` for ``cm^3``, ``3`` for
  ``3 hours``). A reference without a unit is compared as before.
* Relations: a relation between expressions without variables that is false, alone or as
  a link of a chain of relations (``\\sqrt{3} = \\sqrt{2}``, ``6 \\cdot 7 = 41``, ``2 < 1``,
  ``x = 5+5+1 = 7 = 11``), is wrong; a true one is its last side (``6 \\cdot 7 = 42`` answers 42);
  ``x = 5`` is 5 (math-verify's assignment rule).
* Several different math spans in a prose answer (``it is $\\sqrt3$, though $\\sqrt2$ is
  possible``) are a hedge, wrong; the same value restated (``$\\sqrt5$, which is $5^{1/2}$``) is
  one answer.
* A list of solutions ``x = a, x = b \\pm c`` (reference or answer) is the set of its values.
* math-verify's options are parameters: ``precision`` (its ``float_rounding``),
  ``match_types`` (``["latex", "expr"]``), ``strict`` and ``allow_set_relation_comp``.
* Any other reference goes to math-verify and sympy (see
  :mod:`grpo_rewards.builtins.math_check` for how bare LaTeX, plain-text algebra
  and prose are read) in a process pool with a hard time limit per item
  (:mod:`grpo_rewards.isolation.pool`), so it works from any thread and a
  pathological expression cannot hang training.

Scores: ``value`` when equivalent; ``wrong_value`` when not, when the completion
has no answer, when its answer does not parse, and when the policy made its
answer unscorable: longer than :data:`MAX_ANSWER_CHARS` (or twice the reference; with
``extract = "none"`` the cap applies to what math-verify parses, each ``\\boxed{}`` and math
span ``$...$``, ``\\(...\\)``, ``\\[...\\]`` of the completion, and the whole completion is
capped at :data:`MAX_COMPLETION_CHARS`, so long reasoning still scores), nested deeper
than :data:`MAX_NESTING`, a tower of powers or a huge power or
factorial the reference does not have, or a comparison that timed out or failed
against a reference that verifies against itself in time. An unscorable answer
never scores better than a wrong one. ``None`` (the row does not count) only when
the reference is missing, not text, or does not parse (whatever the completion).
A batch has a time budget (``batch_timeout_seconds``): answers still unverified
when it runs out score ``wrong_value``. Identical ``(reference, answer)`` pairs in
a batch are verified once.

Compared with TRL's and open-r1's ``accuracy_reward`` (math-verify on the whole
completion, ``None`` for an unparseable gold) and with Math-Verify's own tests, these
differences are deliberate (listed case by case in ``tests/conformance``, counted in
``docs/conformance.md``):

* the answer is extracted first; a timeout is wrong rather than ``None``;
* ``require_literal`` refuses arithmetic left undone against a numeric reference;
* a chain of relations with a false link is wrong (math-verify reads its last side);
* a reasoning block is not required: a completion with no ``</think>`` is scored on
  its answer (TRL's ``reasoning_accuracy_reward`` scores it 0); requiring the layout
  is the job of the format rewards.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from typing import Any

from grpo_rewards.answers import strip_reasoning
from grpo_rewards.answers.boxes import iter_boxes
from grpo_rewards.answers.extraction import check_extraction, compared_answer, extract_answer
from grpo_rewards.answers.numbers import format_number, parse_literal
from grpo_rewards.answers.units import compare_units, split_unit
from grpo_rewards.builtins import math_check
from grpo_rewards.completions import completion_text
from grpo_rewards.extras import require_extra
from grpo_rewards.isolation.pool import START_METHODS, Outcome, run_items
from grpo_rewards.specs import RewardSpec, VerifierSpec
from grpo_rewards.verdict import Status, Verdict, explanation

NO_EXTRACTION = "none"
MAX_ANSWER_CHARS = 1000  # or twice the reference's length, when that is more
MAX_COMPLETION_CHARS = 32_000  # extract = "none": the whole completion; its math spans as MAX_ANSWER_CHARS
MAX_NESTING = 24  # braces, brackets and parentheses
GOLD_CACHE = 4096  # references remembered as scorable (or not) after a timeout made us ask
log = logging.getLogger("grpo.rewards.math")

_NESTED_POWER = re.compile(r"\^\s*\{[^{}]*\^|\^\s*[\w.]+\s*\^|\^\s*\{[^{}]*\{[^{}]*\^")
_HUGE_POWER = re.compile(r"\^\s*\{?\s*\d{5,}|\d{4,}\s*!|\\(?:tbinom|dbinom|binom)\s*\{\s*\d{5,}")
_BRACKETS = re.compile(r"[{}()\[\]]")
_MATH_SPAN = re.compile(r"\$\$.+?\$\$|\$.+?\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)
_gold_scorable: OrderedDict[tuple[str, math_check.Options], bool] = OrderedDict()


def _check_options(timeout_seconds: float, workers: int, start_method: str, batch_timeout_seconds: float) -> None:
    if isinstance(timeout_seconds, bool) or not timeout_seconds > 0:
        raise ValueError(f"timeout_seconds must be a positive number, got {timeout_seconds!r}")
    if isinstance(batch_timeout_seconds, bool) or not batch_timeout_seconds > 0:
        raise ValueError(f"batch_timeout_seconds must be a positive number, got {batch_timeout_seconds!r}")
    if workers < 0:
        raise ValueError(f"workers must be 0 (one per CPU, at most 8) or more, got {workers!r}")
    if start_method not in START_METHODS:
        raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}, got {start_method!r}")


def _nesting(text: str) -> int:
    depth = deepest = 0
    for bracket in _BRACKETS.finditer(text):
        depth += 1 if bracket.group() in "{([" else -1
        deepest = max(deepest, depth)
    return deepest


def _longest_math(text: str) -> int:
    """The length of the longest math span of ``text``: a ``\\boxed{}`` content (to its closing brace,
    or the end) or a ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]`` span."""
    longest = max((len(span.group()) for span in _MATH_SPAN.finditer(text)), default=0)
    for start, end, _ in iter_boxes(text):
        longest = max(longest, (len(text) if end is None else end) - start)
    return longest


def unscorable(gold: str, answer: str, whole_text: bool = False) -> str | None:
    """Why ``answer`` is refused before any parsing (too long, too deep, an explosive power), else None.

    ``whole_text``: ``answer`` is a whole completion (``extract = "none"``): the length cap
    applies to its math spans (what math-verify parses), the whole text to
    :data:`MAX_COMPLETION_CHARS`; the nesting and power guards to the whole text.
    """
    cap = max(MAX_ANSWER_CHARS, 2 * len(gold))
    if whole_text:
        if len(answer) > max(MAX_COMPLETION_CHARS, cap):
            return f"the completion is longer than {max(MAX_COMPLETION_CHARS, cap)} characters"
        if len(answer) > cap and _longest_math(answer) > cap:
            return f"a math span of the completion is longer than {cap} characters"
    elif len(answer) > cap:
        return f"the answer is longer than {cap} characters"
    if ("{" in answer or "(" in answer or "[" in answer) and _nesting(answer) > max(MAX_NESTING, _nesting(gold)):
        return f"the answer is nested deeper than {MAX_NESTING} levels"
    if "^" in answer and _NESTED_POWER.search(answer) and not _NESTED_POWER.search(gold):
        return "the answer has a tower of powers"
    if _HUGE_POWER.search(answer) and not _HUGE_POWER.search(gold):
        return "the answer has a huge power or factorial"
    return None


def _remember(gold: tuple[str, math_check.Options], scorable: bool) -> None:
    _gold_scorable[gold] = scorable
    _gold_scorable.move_to_end(gold)
    while len(_gold_scorable) > GOLD_CACHE:
        _gold_scorable.popitem(last=False)


def verify_pairs(
    pairs: list[tuple[str, str]],
    *,
    timeout_seconds: float = 5.0,
    workers: int = 0,
    start_method: str = "spawn",
    require_literal: bool = False,
    batch_timeout_seconds: float | None = None,
    whole_text: bool = False,
    options: math_check.Options = math_check.DEFAULT_OPTIONS,
) -> list[Verdict]:
    """One :class:`Verdict` per ``(reference, answer)`` pair; duplicates are verified once.

    Numeric references are decided here by the number grammar
    (:func:`math_check.literal_check`); the rest go to math-verify in the worker
    pool. An answer that could not be scored (refused, timed out, failed) is
    wrong when its reference verifies against itself, else undecided. ``whole_text``:
    the answers are whole completions (math-verify finds the answer in them, and
    ``require_literal`` applies to what it found).
    """
    verdicts: dict[tuple[str, str], Verdict] = {}
    hard: list[tuple[str, str]] = []
    sent: dict[tuple[str, str], tuple[str, str]] = {}  # a pair as the worker compares it (units peeled)
    for pair in dict.fromkeys(pairs):
        compared = pair if whole_text else with_units(*pair)
        if isinstance(compared, str):
            verdicts[pair] = Verdict.wrong({"reference": pair[0], "answer": pair[1]}, compared)
            continue
        quick = math_check.literal_check(*compared, require_literal and not whole_text, options)
        if quick is not None:
            verdicts[pair] = _verdict(Outcome("ok", quick))
            continue
        refused = unscorable(*pair, whole_text=whole_text)
        if refused:
            verdicts[pair] = Verdict.wrong({"reference": "", "answer": ""}, refused)
            continue
        hard.append(pair)
        sent[pair] = compared
    outcomes = run_items(
        math_check.check, [(*sent[p], require_literal, whole_text, options) for p in hard], timeout=timeout_seconds,
        workers=workers, start_method=start_method, initializer=math_check.init_worker, budget=batch_timeout_seconds,
    )
    failed = [(pair, outcome) for pair, outcome in zip(hard, outcomes, strict=True) if not outcome.ok]
    if failed:
        _learn_golds({sent[pair][0] for pair, _ in failed}, timeout_seconds, workers, start_method, options)
    for pair, outcome in zip(hard, outcomes, strict=True):
        if outcome.ok:
            verdicts[pair] = _verdict(outcome)
        elif _gold_scorable.get((sent[pair][0], options), False):
            verdicts[pair] = Verdict.wrong({"reference": "", "answer": ""},
                                           f"the answer could not be scored: math-verify {outcome.status}: {outcome.reason}")
        else:
            verdicts[pair] = Verdict.undecided(f"math-verify {outcome.status}: {outcome.reason}")
    return [verdicts[p] for p in pairs]


def _learn_golds(golds: set[str], timeout_seconds: float, workers: int, start_method: str,
                 options: math_check.Options = math_check.DEFAULT_OPTIONS) -> None:
    """Ask the pool whether each reference verifies against itself (once per reference; remembered)."""
    unknown = sorted(g for g in golds if (g, options) not in _gold_scorable)
    if not unknown:
        return
    outcomes = run_items(math_check.check_gold, [(g, options) for g in unknown], timeout=timeout_seconds,
                         workers=workers, start_method=start_method, initializer=math_check.init_worker,
                         budget=timeout_seconds + 2.0)
    for gold, outcome in zip(unknown, outcomes, strict=True):
        _remember((gold, options), bool(outcome.ok and outcome.value))


def with_units(gold: str, answer: str) -> tuple[str, str] | str:
    """The pair to compare once units are checked (:mod:`grpo_rewards.answers.units`), or why the answer is wrong.

    A reference without a unit leaves the pair as it is. With a unit, the answer must carry one of
    the same kind: the values are compared, the answer's converted to the reference's unit (a
    conversion applies to a number literal; an expression in another unit is wrong).
    """
    gold_value = math_check.gold_text(gold)
    gold_quantity = split_unit(gold_value)
    if gold_quantity is None:
        return gold, answer
    answer_quantity = split_unit(answer)
    rule = compare_units(gold_quantity[1], answer_quantity[1] if answer_quantity else None)
    if isinstance(rule, str):
        return rule
    value = answer_quantity[0]
    if rule != 1:
        number = parse_literal(value)
        if number is None or number.percent:
            return f"the answer is in {answer_quantity[1]}: only a number literal is converted to {gold_quantity[1]}"
        value = format_number(number.value * rule)
    return gold_quantity[0], value


def _verdict(outcome: Outcome) -> Verdict:
    status, gold, answer, reason = outcome.value
    parsed = {"reference": gold, "answer": answer}
    if status == "ok":
        return Verdict.correct(parsed, reason)
    if status == "wrong":
        return Verdict.wrong(parsed, reason)
    return Verdict.undecided(reason, parsed)


class MathEquivalence:
    """The ``math_equivalence`` reward (module docs); a module-level class so that it pickles."""

    __name__ = "math_equivalence"

    def __init__(self, value: float = 1.0, wrong_value: float = 0.0, extract: str = "auto",
                 pattern: str | None = None, reference_column: str = "answer", timeout_seconds: float = 5.0,
                 workers: int = 0, start_method: str = "spawn", require_literal: bool = True,
                 batch_timeout_seconds: float = 120.0, precision: int = 6, match_types: list[str] | None = None,
                 strict: bool = True, allow_set_relation_comp: bool = False) -> None:
        require_extra("math", "math_equivalence")
        _check_options(timeout_seconds, workers, start_method, batch_timeout_seconds)
        self.options = _options(precision, match_types, strict, allow_set_relation_comp)
        check_extraction(extract, pattern, extra=(NO_EXTRACTION,))
        self.value, self.wrong_value = value, wrong_value
        self.extract, self.pattern, self.reference_column = extract, pattern, reference_column
        self.timeout_seconds, self.workers, self.start_method = timeout_seconds, workers, start_method
        self.require_literal, self.batch_timeout_seconds = require_literal, batch_timeout_seconds

    def __repr__(self) -> str:
        return f"MathEquivalence(extract={self.extract!r}, require_literal={self.require_literal}, {self.options})"

    def _answer_of(self, text: str) -> str | None:
        if self.extract == NO_EXTRACTION:  # math-verify reads the completion, never its reasoning block
            return strip_reasoning(text)
        return extract_answer(text, self.extract, pattern=self.pattern)

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        scores, verdicts, _ = self._judge(completions, columns)
        unscored = [v.reason for v in verdicts if "could not be scored" in v.reason or v.reason.startswith("math-verify")]
        if unscored:
            log.warning("math_equivalence: %d of %d rows could not be verified (%s)", len(unscored), len(scores),
                        unscored[0])
        return scores

    def explain(self, completions: list[Any], **columns: Any) -> list[dict[str, Any] | None]:
        """Why each row scored as it did (:func:`grpo_rewards.verdict.explanation`; ``None``: no reference)."""
        _, verdicts, rows = self._judge(completions, columns)
        out: list[dict[str, Any] | None] = [None] * len(completions)
        for (i, answer), verdict in zip(rows, verdicts, strict=True):
            out[i] = explanation(verdict, answer)
        return out

    def _judge(self, completions: list[Any], columns: dict[str, Any]
               ) -> tuple[list[float | None], list[Verdict], list[tuple[int, str | None]]]:
        """Scores, the verdicts of the rows verified, and those rows with their extracted answers."""
        refs = columns.get(self.reference_column)
        if refs is None:
            raise KeyError(f"column {self.reference_column!r} is missing (math_equivalence compares with it)")
        if len(refs) != len(completions):
            raise ValueError(
                f"{len(completions)} completions but {len(refs)} values in column {self.reference_column!r}")
        out: list[float | None] = [None] * len(completions)
        rows: list[tuple[int, str | None]] = []
        pairs: list[tuple[str, str]] = []
        for i, (completion, ref) in enumerate(zip(completions, refs, strict=True)):
            if ref is None or isinstance(ref, (list, dict)):
                continue
            try:
                text = completion_text(completion)
            except TypeError:
                continue
            answer = self._answer_of(text)
            if answer is not None:
                answer = str(compared_answer(answer, str(ref)))
            rows.append((i, answer))  # a missing answer still goes: an unparseable reference must score None
            pairs.append((str(ref), answer or ""))
        verdicts = verify_pairs(pairs, timeout_seconds=self.timeout_seconds, workers=self.workers,
                                start_method=self.start_method, require_literal=self.require_literal,
                                batch_timeout_seconds=self.batch_timeout_seconds,
                                whole_text=self.extract == NO_EXTRACTION, options=self.options)
        for (i, _), verdict in zip(rows, verdicts, strict=True):
            out[i] = self.value if verdict.ok else (self.wrong_value if verdict.status is Status.WRONG else None)
        return out, verdicts, rows


def math_equivalence(
    value: float = 1.0,
    wrong_value: float = 0.0,
    extract: str = "auto",
    pattern: str | None = None,
    reference_column: str = "answer",
    timeout_seconds: float = 5.0,
    workers: int = 0,
    start_method: str = "spawn",
    require_literal: bool = True,
    batch_timeout_seconds: float = 120.0,
    precision: int = 6,
    match_types: list[str] | None = None,
    strict: bool = True,
    allow_set_relation_comp: bool = False,
) -> MathEquivalence:
    """Score ``value`` when the extracted answer is mathematically equal to the reference (math-verify).

    ``wrong_value`` for a wrong, missing, unparseable or unscorable answer (one that
    timed out: ``timeout_seconds`` is a hard limit per item, enforced in ``workers``
    child processes, 0 = one per CPU up to 8, started with ``start_method``;
    ``batch_timeout_seconds`` bounds a whole batch); ``None`` when the reference is
    missing or does not parse. ``require_literal``: against a reference that is a
    plain number, only a number literal counts (``17*23+5`` is not 396). ``extract``
    is an extraction method of :func:`grpo_rewards.extract_answer` or ``"none"``
    (math-verify reads the whole completion); ``pattern`` is the regex for
    ``extract = "regex"``. ``precision``, ``match_types``, ``strict`` and ``allow_set_relation_comp``
    are math-verify's options (:class:`grpo_rewards.builtins.math_check.Options`; ``precision`` is its
    ``float_rounding``, applied to number literals too).
    """
    return MathEquivalence(value, wrong_value, extract, pattern, reference_column, timeout_seconds, workers,
                           start_method, require_literal, batch_timeout_seconds, precision, match_types, strict,
                           allow_set_relation_comp)


def _options(precision: int, match_types: list[str] | None, strict: bool,
             allow_set_relation_comp: bool) -> math_check.Options:
    if match_types is not None and (isinstance(match_types, str) or not isinstance(match_types, (list, tuple))):
        raise ValueError(f"match_types must be a list such as [\"latex\", \"expr\"], got {match_types!r}")
    types = math_check.MATCH_TYPES if match_types is None else tuple(match_types)
    return math_check.Options(precision, types, strict, allow_set_relation_comp).check()


class MathVerifier:
    """The ``math`` verifier (see :func:`math_verifier`); a module-level class so that it pickles."""

    __name__ = "math"

    def __init__(self, timeout_seconds: float = 5.0, workers: int = 0, start_method: str = "spawn",
                 require_literal: bool = True, precision: int = 6, match_types: list[str] | None = None,
                 strict: bool = True, allow_set_relation_comp: bool = False) -> None:
        require_extra("math", "verify:math")
        _check_options(timeout_seconds, workers, start_method, timeout_seconds)
        self.options = _options(precision, match_types, strict, allow_set_relation_comp)
        self.timeout_seconds, self.workers, self.start_method = timeout_seconds, workers, start_method
        self.require_literal = require_literal

    def __call__(self, answer: str, reference: str) -> Verdict:
        return verify_pairs([(str(reference), str(answer))], timeout_seconds=self.timeout_seconds,
                            workers=self.workers, start_method=self.start_method,
                            require_literal=self.require_literal, options=self.options)[0]


def math_verifier(timeout_seconds: float = 5.0, workers: int = 0, start_method: str = "spawn",
                  require_literal: bool = True, precision: int = 6, match_types: list[str] | None = None,
                  strict: bool = True, allow_set_relation_comp: bool = False) -> MathVerifier:
    """math-verify equivalence of an answer and a reference, with a hard time limit (see ``math_equivalence``).

    The verdict's ``parsed`` holds what each side parsed to; an unparseable
    reference is ``undecided``; an answer that timed out is ``wrong``.
    """
    return MathVerifier(timeout_seconds, workers, start_method, require_literal, precision, match_types, strict,
                        allow_set_relation_comp)


REWARD_SPECS = [
    RewardSpec(
        name="math_equivalence",
        factory=math_equivalence,
        columns=("answer",),
        example='''[rewards.correct]
use = "math_equivalence"
value = 1.0             # score when the answer equals the reference
extract = "auto"        # <answer>, ####, \\boxed{}, Answer:, last number; "none" = let math-verify look
require_literal = true  # a numeric reference needs a number answer: "17*23+5" is not 396
timeout_seconds = 5.0   # hard limit per completion; an answer that times out scores wrong_value
''',
    ),
]

VERIFIER_SPECS = [
    VerifierSpec(
        name="math",
        factory=math_verifier,
        example='''[rewards.correct]
use = "verify:math"
timeout_seconds = 5.0
''',
    ),
]
