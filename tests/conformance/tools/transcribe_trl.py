"""Transcribe TRL's ``tests/test_rewards.py`` into ``cases/trl.json``.

The cases of ``accuracy_reward`` and ``reasoning_accuracy_reward``, both reproduced by
``math_equivalence`` (its extraction drops the ``<think>`` block), read from the test
file at a commit; the expected scores are the tests' asserts, row by row. Every
other test (``think_format_reward``, soft overlong punishment, repetition penalty,
cosine-scaled reward) is listed as not covered.

Usage: python tests/conformance/tools/transcribe_trl.py GIT_DIR COMMIT > tests/conformance/cases/trl.json
"""

from __future__ import annotations

import json
import sys

from _peer_tests import PeerTests, with_reasons, with_sources

REPO, PATH = "https://github.com/huggingface/trl", "tests/test_rewards.py"
CONFIG = {"reference_column": "solution", "workers": 2, "timeout_seconds": 60.0}
PLUGIN = "no built-in: left to the grpo-rewards-reasoning plugin package"
ME = "grpo_rewards/builtins/math_equivalence.py"
DELIBERATE = {
    "number_words": {
        "reward": "math_equivalence", "documented_in": "grpo_rewards/answers/numbers.py",
        "phrase": "an integer in English words",
        "reason": "an integer written in English words is a number literal: the reference 'forty two' is 42, so "
                  "the answer 42 scores (TRL cannot parse it and scores None)",
    },
    "reasoning_not_required": {
        "reward": "math_equivalence", "documented_in": ME, "phrase": "a reasoning block is not required",
        "reason": "math_equivalence scores the answer whether or not a reasoning block came first; requiring the "
                  "<think> layout is the format rewards' job (TRL's reasoning_accuracy_reward scores 0 without "
                  "</think>)",
    },
}
# (test, completions variable, solutions variable, expected per row, extra fields)
ROWS = (
    ("TestAccuracyReward::test_accuracy_reward_correct_answer", "completion", "solution", (1.0, 1.0), {}),
    ("TestAccuracyReward::test_accuracy_reward_wrong_answer", "completion", "solution", (0.0,), {}),
    ("TestAccuracyReward::test_accuracy_reward_wrong_answer_no_latex", "completion", "solution", (0.0,), {}),
    ("TestAccuracyReward::test_accuracy_reward_unparsable_gold", "completion", "solution", (None, None), {}),
    ("TestAccuracyReward::test_accuracy_reward_in_worker_thread", "completions", "solutions", (1.0,),
     {"thread": True}),
    ("TestReasoningAccuracyReward::test_correct_answer_yields_unit_reward", "completions", "solutions", (1.0, 1.0),
     {}),
    ("TestReasoningAccuracyReward::test_correct_answer_with_custom_tags_yields_unit_reward", "completions",
     "solutions", (1.0,), {"peer_options": {"reasoning_delimiters": ["</REASONING_END>"]}}),
    ("TestReasoningAccuracyReward::test_incorrect_answer_yields_zero_reward", "completion", "solution", (0.0,), {}),
    ("TestReasoningAccuracyReward::test_correct_answer_in_reasoning_yields_zero_reward", "completions", "solutions",
     (0.0, 0.0), {}),
    ("TestReasoningAccuracyReward::test_incomplete_reasoning_yields_zero_reward", "completions", "solutions",
     (0.0, 0.0), {}),
    ("TestReasoningAccuracyReward::test_unparsable_gold_solution_yields_none_reward", "completions", "solutions",
     (None,), {}),
)
ANNOTATIONS = {
    "test_unparsable_gold_solution_yields_none_reward[0]": {"deliberate": "number_words", "ours": 1.0},
    "test_incomplete_reasoning_yields_zero_reward[1]": {"deliberate": "reasoning_not_required", "ours": 1.0},
}
NOT_COVERED = {
    "TestThinkFormatReward": f"think_format_reward: {PLUGIN}",
    "TestSoftOverlongPunishmentReward": f"soft_overlong_punishment: {PLUGIN}",
    "TestRepetitionPenaltyReward": f"repetition_penalty_reward: {PLUGIN}",
    "TestCosineScaledReward": f"cosine_scaled_reward: {PLUGIN}",
}


def cases(peer: PeerTests) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for test, completions, solutions, expected, extra in ROWS:
        peer_function = "accuracy_reward" if test.startswith("TestAccuracyReward") else "reasoning_accuracy_reward"
        rows = zip(peer.contents(test, completions), peer.literal(test, solutions), expected, strict=True)
        for row, (text, solution, score) in enumerate(rows):
            case_id = f"{test.split('::')[1]}[{row}]"
            out.append({"id": case_id, "test": f"{PATH}::{test}", "row": row, "peer": peer_function,
                        "reward": "math_equivalence", "config": CONFIG, "chat": True, "completion": text,
                        "columns": {"solution": solution}, "expected": score, **extra, **ANNOTATIONS.get(case_id, {})})
    return out


def main() -> None:
    peer = PeerTests(sys.argv[1], sys.argv[2], PATH)
    found = cases(peer)
    covered = {c["test"].split("::", 1)[1] for c in found}
    left = [t for t in peer.tests if t not in covered]
    unknown = [t for t in left if t.split("::")[0] not in NOT_COVERED]
    if unknown:
        raise SystemExit(f"tests neither transcribed nor listed as not covered: {unknown}")
    doc = {
        "suite": "TRL",
        "source": {"repo": REPO, "commit": peer.commit, "files": [PATH], "peer_functions": "trl/rewards/",
                   "transcribed_by": "tests/conformance/tools/transcribe_trl.py"},
        "deliberate": DELIBERATE,
        "not_covered": [{"test": f"{PATH}::{t}", "reason": NOT_COVERED[t.split("::")[0]]} for t in left],
        "cases": with_reasons(with_sources(found, REPO, peer.commit), DELIBERATE),
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
