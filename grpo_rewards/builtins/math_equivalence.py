"""``math_equivalence`` (reward) and ``math`` (verifier): is the answer mathematically equal to the reference?

The answer is extracted from each completion (``extract``/``pattern``, see
:mod:`grpo_rewards.extraction`; ``extract = "none"`` hands the whole completion to
math-verify, which looks for ``\\boxed{}``, LaTeX and numbers itself), then
compared with the row's reference by math-verify and sympy (see
:mod:`grpo_rewards.builtins.math_check` for parsing, bare-LaTeX wrapping and
GSM8K ``####`` golds). Comparisons run in a process pool with a hard time limit
per item (:mod:`grpo_rewards.builtins.timeout_pool`), so they work from any thread
and a pathological expression cannot hang training.

Scores: ``value`` when equivalent; ``wrong_value`` when not, or when the
completion has no answer or its answer does not parse; ``None`` (the row does not
count) when the reference does not parse (whatever the completion), the
comparison timed out or failed, or the row's reference or completion is not text.
Identical ``(reference, answer)`` pairs in a batch are verified once, and pairs
where both sides are plain integers (most GSM8K rows) are compared exactly in
the calling process, without a round trip to the pool.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from grpo_rewards.builtins import math_check
from grpo_rewards.builtins.timeout_pool import START_METHODS, Outcome, run_items
from grpo_rewards.completions import completion_text
from grpo_rewards.extraction import METHODS, extract_answer
from grpo_rewards.specs import RewardSpec, VerifierSpec
from grpo_rewards.verdict import Status, Verdict

NO_EXTRACTION = "none"
log = logging.getLogger("grpo.rewards.math")


def _check_options(timeout_seconds: float, workers: int, start_method: str) -> None:
    if isinstance(timeout_seconds, bool) or not timeout_seconds > 0:
        raise ValueError(f"timeout_seconds must be a positive number, got {timeout_seconds!r}")
    if workers < 0:
        raise ValueError(f"workers must be 0 (one per CPU, at most 8) or more, got {workers!r}")
    if start_method not in START_METHODS:
        raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}, got {start_method!r}")


def verify_pairs(
    pairs: list[tuple[str, str]], *, timeout_seconds: float = 5.0, workers: int = 0, start_method: str = "spawn"
) -> list[Verdict]:
    """One :class:`Verdict` per ``(reference, answer)`` pair; duplicates are verified once.

    Pairs of plain integers are compared here (:func:`math_check.integer_check`);
    the rest go to math-verify in the worker pool.
    """
    verdicts: dict[tuple[str, str], Verdict] = {}
    hard: list[tuple[str, str]] = []
    for pair in dict.fromkeys(pairs):
        quick = math_check.integer_check(*pair)
        if quick is None:
            hard.append(pair)
        else:
            verdicts[pair] = _verdict(Outcome("ok", quick))
    outcomes = run_items(
        math_check.check, hard, timeout=timeout_seconds, workers=workers,
        start_method=start_method, initializer=math_check.init_worker,
    )
    verdicts.update(zip(hard, map(_verdict, outcomes), strict=True))
    return [verdicts[p] for p in pairs]


def _verdict(outcome: Outcome) -> Verdict:
    if not outcome.ok:
        return Verdict.undecided(f"math-verify {outcome.status}: {outcome.reason}")
    status, gold, answer, reason = outcome.value
    parsed = {"reference": gold, "answer": answer}
    if status == "ok":
        return Verdict.correct(parsed, reason)
    if status == "wrong":
        return Verdict.wrong(parsed, reason)
    return Verdict.undecided(reason, parsed)


def math_equivalence(
    value: float = 1.0,
    wrong_value: float = 0.0,
    extract: str = "auto",
    pattern: str | None = None,
    reference_column: str = "answer",
    timeout_seconds: float = 5.0,
    workers: int = 0,
    start_method: str = "spawn",
) -> Any:
    """Score ``value`` when the extracted answer is mathematically equal to the reference (math-verify).

    ``wrong_value`` for a wrong, missing or unparseable answer; ``None`` when the
    reference does not parse or verification took longer than ``timeout_seconds``
    (hard limit per item, enforced in ``workers`` child processes, 0 = one per CPU
    up to 8, started with ``start_method``). ``extract`` is an extraction method of
    :func:`grpo_rewards.extract_answer` or ``"none"`` (math-verify reads the whole
    completion); ``pattern`` is the regex for ``extract = "regex"``.
    """
    _check_options(timeout_seconds, workers, start_method)
    if extract not in (*METHODS, NO_EXTRACTION):
        raise ValueError(f"unknown extraction method {extract!r}; choose one of {', '.join((*METHODS, NO_EXTRACTION))}")
    if extract == "regex" and not pattern:
        raise ValueError("extract = 'regex' needs a 'pattern'")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None

    def answer_of(text: str) -> str | None:
        return text if extract == NO_EXTRACTION else extract_answer(text, extract, pattern=pattern)

    def reward(completions: list[Any], **columns: Any) -> list[float | None]:
        refs = columns.get(reference_column)
        if refs is None:
            raise KeyError(f"column {reference_column!r} is missing (math_equivalence compares with it)")
        if len(refs) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(refs)} values in column {reference_column!r}")
        out: list[float | None] = [None] * len(completions)
        todo: list[int] = []
        pairs: list[tuple[str, str]] = []
        for i, (completion, ref) in enumerate(zip(completions, refs, strict=True)):
            if ref is None or isinstance(ref, (list, dict)):
                continue
            try:
                text = completion_text(completion)
            except TypeError:
                continue
            todo.append(i)  # a missing answer still goes: an unparseable reference must score None, not wrong
            pairs.append((str(ref), answer_of(text) or ""))
        verdicts = verify_pairs(pairs, timeout_seconds=timeout_seconds, workers=workers, start_method=start_method)
        for i, verdict in zip(todo, verdicts, strict=True):
            out[i] = value if verdict.ok else (wrong_value if verdict.status is Status.WRONG else None)
        failed = [v.reason for v in verdicts if v.reason.startswith("math-verify ")]
        if failed:
            log.warning("math_equivalence: %d of %d rows scored None (%s)", len(failed), len(out), failed[0])
        return out

    reward.__name__ = "math_equivalence"
    return reward


def math_verifier(timeout_seconds: float = 5.0, workers: int = 0, start_method: str = "spawn") -> Any:
    """math-verify equivalence of an answer and a reference, with a hard time limit (see ``math_equivalence``).

    The verdict's ``parsed`` holds what each side parsed to; an unparseable
    reference or a timeout is ``undecided``.
    """
    _check_options(timeout_seconds, workers, start_method)

    def verify(answer: str, reference: str) -> Verdict:
        return verify_pairs([(str(reference), str(answer))], timeout_seconds=timeout_seconds,
                            workers=workers, start_method=start_method)[0]

    verify.__name__ = "math"
    return verify


REWARD_SPECS = [
    RewardSpec(
        name="math_equivalence",
        factory=math_equivalence,
        columns=("answer",),
        example='''[rewards.correct]
use = "math_equivalence"
value = 1.0             # score when the answer equals the reference
extract = "auto"        # <answer>, ####, \\boxed{}, Answer:, last number; "none" = let math-verify look
timeout_seconds = 5.0   # hard limit per completion; a timeout scores None
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
