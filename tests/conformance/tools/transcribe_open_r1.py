"""Transcribe open-r1's ``tests/test_rewards.py`` into ``cases/open_r1.json``.

The cases of the peer functions we have a built-in for (``accuracy_reward`` →
``math_equivalence``, ``format_reward`` → ``strict_format`` with ``think`` tags,
``tag_count_reward`` → ``xml_count`` with 0.25 per tag and no trailing-text charge),
read from the test file at a commit; every other test is listed as not covered.

Usage: python tests/conformance/tools/transcribe_open_r1.py GIT_DIR COMMIT > tests/conformance/cases/open_r1.json
"""

from __future__ import annotations

import json
import sys

from _peer_tests import PeerTests, with_sources

REPO, PATH = "https://github.com/huggingface/open-r1", "tests/test_rewards.py"
ACCURACY = {"peer": "accuracy_reward", "reward": "math_equivalence",
            "config": {"reference_column": "solution", "workers": 2, "timeout_seconds": 60.0}}
FORMAT = {"peer": "format_reward", "reward": "strict_format",
          "config": {"reasoning_tag": "think", "value": 1.0, "trailing_newline": False}}
TAGS = {"peer": "tag_count_reward", "reward": "xml_count",
        "config": {"reasoning_tag": "think", "per_tag": 0.25, "per_trailing_char": 0.0}}
PLUGIN = "no built-in: left to the grpo-rewards-reasoning plugin package"
LEN_TESTS = ("test_same_length_responses", "test_different_lengths_correct_answers",
             "test_different_lengths_incorrect_answers", "test_mixed_correctness", "test_unparseable_solution")


def _not_covered_reason(test: str) -> str:
    cls, name = test.split("::")
    if name == "test_get_reward_funcs":
        return "open-r1's own registry of reward names (ours: grpo rewards list, tests/plugin_system)"
    if name in LEN_TESTS:
        return f"len_reward: {PLUGIN}"
    if "soft_overlong" in name:
        return f"soft_overlong_punishment: {PLUGIN}"
    for key, peer in (("reasoning_steps", "reasoning_steps_reward"), ("cosine", "cosine_scaled_reward")):
        if key in name:
            return f"{peer}: {PLUGIN}"
    if cls == "TestCodeFormat":
        return f"code_format_reward: {PLUGIN}"
    if cls == "TestRepetitionPenaltyReward" and "tag_count" not in name:
        return f"repetition_penalty_reward: {PLUGIN}"
    raise SystemExit(f"{test}: no reason known for leaving it out")


def cases(peer: PeerTests) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []

    def add(test: str, row: int, spec: dict[str, object], completion: str, expected: float,
            columns: dict[str, str] | None = None) -> None:
        out.append({"id": f"{test}[{row}]", "test": f"{PATH}::{peer.full(test)}", "row": row, **spec, "chat": True,
                    "completion": completion, "columns": columns or {}, "expected": expected})

    for test, expected in (("test_accuracy_reward_correct_answer", 1.0), ("test_accuracy_reward_wrong_answer", 0.0),
                           ("test_accuracy_reward_wrong_answer_no_latex", 0.0)):
        add(test, 0, ACCURACY, peer.contents(test, "completion")[0], expected,
            {"solution": peer.literal(test, "solution")[0]})
    multiple = "TestRewards::test_multiple_completions"
    for row, (text, solution, expected) in enumerate(zip(peer.contents(multiple, "completions"),
                                                         peer.literal(multiple, "solutions"), (1.0, 0.0), strict=True)):
        add(multiple, row, ACCURACY, text, expected, {"solution": solution})
    add("test_format_reward_correct", 0, FORMAT, peer.contents("test_format_reward_correct", "completion")[0], 1.0)
    for row, text in enumerate(peer.literal("test_format_reward_incorrect", "incorrect_formats")):
        add("test_format_reward_incorrect", row, FORMAT, text, 0.0)
    add("test_format_reward_specific_multiline", 0, FORMAT,
        peer.literal("test_format_reward_specific_multiline", "inputs"), 1.0)
    for test, expected in (("all_correct", 1.0), ("missing_think_begin", 0.75), ("missing_think_end", 0.75),
                           ("missing_answer_begin", 0.75), ("missing_answer_end", 0.75), ("missing_all_tags", 0.0)):
        name = f"test_tag_count_rewards_{test}"
        add(name, 0, TAGS, peer.contents(name, "completion")[0], expected)
    for case in out:  # ids name the method alone; the one repeated method name carries its class
        if case["id"].startswith("TestRewards::"):
            case["id"] = case["id"].split("::", 1)[1]
    return out


def main() -> None:
    peer = PeerTests(sys.argv[1], sys.argv[2], PATH)
    found = cases(peer)
    covered = {c["test"].split("::", 1)[1] for c in found}
    doc = {
        "suite": "open-r1",
        "source": {"repo": REPO, "commit": peer.commit, "files": [PATH], "peer_functions": "src/open_r1/rewards.py",
                   "transcribed_by": "tests/conformance/tools/transcribe_open_r1.py"},
        "deliberate": {},
        "not_covered": [{"test": f"{PATH}::{t}", "reason": _not_covered_reason(t)} for t in peer.tests
                        if t not in covered],
        "cases": with_sources(found, REPO, peer.commit),
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
