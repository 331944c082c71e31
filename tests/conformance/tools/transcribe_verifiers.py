"""Transcribe PrimeIntellect verifiers' ``XMLParser`` tests into ``cases/verifiers.json``.

The peer code is ``verifiers/legacy/parsers/xml_parser.py`` (and its base ``parser.py``) of the
verifiers 0.3.1 wheel on PyPI, the last release that ships ``XMLParser`` (0.4.0 holds only
``verifiers.v1``, without it). The test file is ``tests/test_xml_parser.py`` of
PrimeIntellect-ai/verifiers at tag ``v0.3.0``, whose ``xml_parser.py`` is the 0.3.1 file but for
two import lines. The peer code is run as written (its two modules loaded from the wheel, the
``Messages`` type alias stubbed) to score each case:

* ``test_format_reward_function``: the format reward → ``xml_format`` with ``mode = "verifiers"``,
  on the test's two completions and on completions of the parser's format and of the ways real
  completions miss it (``format_reward_func[...]``; the test asserts only ``0 <= r <= 1`` and
  ``0.2``, the values are the peer code's);
* ``test_parse_answer_*``: ``parse_answer`` → ``exact_match`` (default ``auto`` extraction) with the
  peer's parsed answer as the reference: 1.0 when ours reads the answer the peer reads, 0.0 when
  the peer finds none (reference ``42``, which no case holds).

Every other test (``parse`` on its own, ``format``, ``get_format_str``, ``get_fields``, the
constructor's checks) tests the parser's API, not a reward, and is listed as not covered.

Usage: python tests/conformance/tools/transcribe_verifiers.py GIT_DIR TAG WHEEL > tests/conformance/cases/verifiers.json
"""

from __future__ import annotations

import hashlib
import json
import sys
import types
import zipfile
from typing import Any

from _peer_tests import PeerTests, with_reasons, with_sources

REPO, PATH = "https://github.com/PrimeIntellect-ai/verifiers", "tests/test_xml_parser.py"
WHEEL_FILES = ("verifiers/legacy/parsers/parser.py", "verifiers/legacy/parsers/xml_parser.py")
FORMAT = {"peer": "XMLParser.get_format_reward_func", "reward": "xml_format",
          "config": {"fields": ["reasoning", "answer"], "mode": "verifiers"}}
PARSE_ANSWER = {"peer": "XMLParser.parse_answer", "reward": "exact_match", "config": {"value": 1.0}}
DELIBERATE = {
    "hedged_answers": {
        "reward": "exact_match", "documented_in": "grpo_rewards/builtins/exact_match.py",
        "phrase": "Several answers are hedging, not an answer",
        "reason": "several different answer tags are hedging, not an answer: parse_answer reads the last one",
    },
}
# (name, assistant message): the parser's format and the ways real completions miss it
LAYOUTS = (
    ("layout", "<reasoning>\nx\n</reasoning>\n<answer>\n42\n</answer>"),
    ("inline", "<reasoning>x</reasoning><answer>42</answer>"),
    ("spaces_around", "  <reasoning> x </reasoning>\n<answer> 42 </answer>\n\n"),
    ("answer_only", "<answer>42</answer>"),
    ("reasoning_only", "<reasoning>x</reasoning>"),
    ("text_after", "<reasoning>x</reasoning><answer>42</answer> Hope this helps!"),
    ("text_before", "Sure! <reasoning>x</reasoning><answer>42</answer>"),
    ("unclosed_answer", "<reasoning>x</reasoning><answer>42"),
    ("reversed", "</answer>42<answer></reasoning>x<reasoning>"),
    ("answer_first", "<answer>42</answer><reasoning>x</reasoning>"),
    ("nested", "<reasoning>x<answer>42</answer></reasoning>"),
    ("unbalanced", "<reasoning>x</answer>"),
    ("two_answers", "<reasoning>x</reasoning><answer>41</answer><answer>42</answer>"),
    ("empty", ""),
)
PARSE_ANSWER_TESTS = ("test_parse_answer_from_completion", "test_parse_answer_from_string_completion",
                      "test_parse_answer_no_answer_field")
ANNOTATIONS = {"test_parse_answer_from_string_completion": {"deliberate": "hedged_answers", "ours": 0.0}}
NOT_COVERED = "XMLParser's API (parse, format, get_format_str, get_fields, the constructor's checks), not a reward"


def load_peer(wheel: str) -> Any:
    """``XMLParser`` from the wheel, its two modules run as written (``verifiers.legacy.types`` stubbed)."""
    with zipfile.ZipFile(wheel) as archive:
        sources = {name: archive.read(name).decode() for name in WHEEL_FILES}
    stub = types.ModuleType("verifiers.legacy.types")
    stub.Messages = Any
    sys.modules["verifiers.legacy.types"] = stub
    for name, source in sources.items():
        module = types.ModuleType(name.removesuffix(".py").replace("/", "."))
        sys.modules[module.__name__] = module
        exec(compile(source, name, "exec"), module.__dict__)
    return sys.modules["verifiers.legacy.parsers.xml_parser"].XMLParser


def _chat(content: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": content}]


def cases(peer: PeerTests, parser_cls: Any) -> list[dict[str, Any]]:
    parser = parser_cls(fields=["reasoning", "answer"], answer_field="answer")  # tests/conftest.py's xml_parser
    reward = parser.get_format_reward_func()
    out: list[dict[str, Any]] = []
    test = peer.full("test_format_reward_function")
    for row, name in enumerate(("good_completion", "bad_completion")):
        completion = peer.literal(test, name)
        out.append({"id": f"test_format_reward_function[{row}]", "test": f"{PATH}::{test}", "row": row, **FORMAT,
                    "completion": completion, "columns": {}, "expected": float(reward(completion))})
    for name, content in LAYOUTS:
        out.append({"id": f"format_reward_func[{name}]", "test": f"{PATH}::{test}", **FORMAT,
                    "completion": _chat(content), "columns": {}, "expected": float(reward(_chat(content)))})
    for short in PARSE_ANSWER_TESTS:
        test = peer.full(short)
        completion = peer.literal(test, "completion")
        parsed = parser.parse_answer(completion)
        out.append({"id": short, "test": f"{PATH}::{test}", **PARSE_ANSWER, "completion": completion,
                    "columns": {"answer": "42" if parsed is None else parsed},
                    "expected": 0.0 if parsed is None else 1.0, **ANNOTATIONS.get(short, {})})
    return out


def main() -> None:
    git_dir, tag, wheel = sys.argv[1:4]
    peer = PeerTests(git_dir, tag, PATH)
    found = cases(peer, load_peer(wheel))
    covered = {c["test"].split("::", 1)[1] for c in found}
    left = [t for t in peer.tests if t not in covered]
    with open(wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    doc = {
        "suite": "verifiers",
        "source": {"repo": REPO, "commit": peer.commit, "files": [PATH],
                   "peer_functions": f"verifiers 0.3.1 wheel (PyPI, sha256 {digest}): {', '.join(WHEEL_FILES)}",
                   "transcribed_by": "tests/conformance/tools/transcribe_verifiers.py"},
        "deliberate": DELIBERATE,
        "not_covered": [{"test": f"{PATH}::{t}", "reason": NOT_COVERED} for t in left],
        "cases": with_reasons(with_sources(found, REPO, peer.commit), DELIBERATE),
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
