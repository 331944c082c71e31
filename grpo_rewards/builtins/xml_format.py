"""``xml_format`` reward: PrimeIntellect verifiers' ``XMLParser`` format reward, with tag order checked.

The fields are XML tags (``fields = ["reasoning", "answer"]``; a field may list alternatives,
``["reasoning", ["code", "answer"]]``, the first being its name). A field *parses* when one
of its tags opens and later closes: ``<f>`` then ``</f>`` (verifiers' ``<f>\\s*(.*?)\\s*</f>``).
Each assistant message is scored, and the completion scores their mean::

    0.4 * (fields present) / (fields)   when at least one field parses
    0.2                                 "spacing"
    0.2                                 the message starts with a tag of the first field
    0.2                                 the message ends with a closing tag of the last field

``mode = "verifiers"`` is verifiers' ``XMLParser.get_format_reward_func`` term for term
(verifiers 0.3.1 on PyPI, ``verifiers/legacy/parsers/xml_parser.py``): a field is present
when it parses or any of its tags occurs at all, the spacing term is always paid (its check
compares a parse with itself, so plain text scores 0.2), the start and end terms look at
the first and last characters only, and a plain-string completion scores 0.0 (verifiers
reads assistant messages only).

``mode = "ordered"`` (default) pays only for format: a field is present when it parses and
its pair stands in schema order, after the pair of every earlier field that parses and
before every later one (pairs out of order or nested count for none of them); the spacing
term is paid when at least one field is present and the message is clean (each of the
schema's tags opens as often as it closes, at most once, and every field that parses is
present); the start and end terms need the first and last fields present. So tags out of
order, closing tags before opening ones and plain text earn nothing, and a plain string is
read as one message. Bounds: ``[0, 1]`` in both modes.
"""

from __future__ import annotations

from typing import Any

from grpo_rewards.builtins.tags import check_tag_name
from grpo_rewards.builtins.xml_count import in_order
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardSpec

MODES = ("ordered", "verifiers")


def _fields(fields: Any) -> list[list[str]]:
    if not isinstance(fields, (list, tuple)) or not fields:
        raise ValueError(f"fields must be a non-empty list of tag names (or lists of alternatives), got {fields!r}")
    out: list[list[str]] = []
    for field in fields:
        alts = [field] if isinstance(field, str) else list(field) if isinstance(field, (list, tuple)) else None
        if not alts:
            raise ValueError(f"each field must be a tag name or a non-empty list of tag names, got {field!r}")
        for alt in alts:
            check_tag_name("fields", alt)
        out.append(alts)
    names = [a for alts in out for a in alts]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate tag in fields: {names}")
    return out


def _span(text: str, tag: str) -> tuple[int, int] | None:
    """Where verifiers' ``<tag>\\s*(.*?)\\s*</tag>`` (re.search, DOTALL) matches: the first opening tag and the
    first closing tag after it (a later opening tag has no closing tag after it if the first has none)."""
    start = text.find(f"<{tag}>")
    if start < 0:
        return None
    end = text.find(f"</{tag}>", start + len(tag) + 2)
    return None if end < 0 else (start, end + len(tag) + 3)


class XmlFormat:
    """The batch reward :func:`xml_format` returns (a module-level class: it pickles)."""

    __name__ = "xml_format"

    def __init__(self, fields: list[list[str]], mode: str):
        self.fields, self.mode = fields, mode

    def verifiers(self, content: str) -> float:
        present = 0
        any_parsed = False
        for alts in self.fields:
            parsed = [a for a in alts if _span(content, a) is not None]
            any_parsed = any_parsed or bool(parsed)
            if parsed or any(f"<{a}>" in content or f"</{a}>" in content for a in alts):
                present += 1
        stripped = content.strip()
        score = 0.4 * present / len(self.fields) if any_parsed else 0.0
        score += 0.2  # verifiers' spacing check compares a parse with itself: always true
        score += 0.2 if any(stripped.startswith(f"<{a}>") for a in self.fields[0]) else 0.0
        score += 0.2 if any(stripped.endswith(f"</{a}>") for a in self.fields[-1]) else 0.0
        return score

    def ordered(self, content: str) -> float:
        spans: list[tuple[int, int] | None] = []
        parsed_any: list[bool] = []
        for alts in self.fields:
            found = [s for s in (_span(content, a) for a in alts) if s is not None]
            spans.append(found[0] if len(found) == 1 else None)  # two alternatives at once: neither
            parsed_any.append(bool(found))
        starts = in_order([s[0] if s else None for s in spans])
        parsed = [s for s in spans if s]
        nested = {x for s in parsed for t in parsed if s is not t and t[0] < s[0] < t[1] for x in (s, t)}
        counted = [ok and s not in nested for ok, s in zip(starts, spans)]
        if not any(counted):
            return 0.0
        clean = all(content.count(f"<{a}>") == content.count(f"</{a}>") <= 1 for alts in self.fields for a in alts)
        clean = clean and counted == parsed_any
        stripped = content.strip()
        first, last = spans[0], spans[-1]
        score = 0.4 * sum(counted) / len(self.fields) + (0.2 if clean else 0.0)
        lead = len(content) - len(content.lstrip())
        score += 0.2 if counted[0] and first is not None and first[0] == lead else 0.0
        score += 0.2 if counted[-1] and last is not None and last[1] == lead + len(stripped) else 0.0
        return score

    def _messages(self, completion: Any) -> list[str] | None:
        if isinstance(completion, (list, tuple)):
            return [completion_text({"content": m.get("content", "")}) for m in completion
                    if isinstance(m, dict) and m.get("role") == "assistant"]
        return None

    def score(self, completion: Any) -> float:
        messages = self._messages(completion)
        if self.mode == "verifiers":
            if not messages:  # verifiers reads assistant messages only: none, or a plain string
                return 0.0
            return sum(map(self.verifiers, messages)) / len(messages)
        if messages is None:
            messages = [completion_text(completion)]
        return sum(map(self.ordered, messages)) / len(messages) if messages else 0.0

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return [self.score(c) for c in completions]


def xml_format(fields: list[str | list[str]] | None = None, mode: str = "ordered") -> XmlFormat:
    """verifiers' XMLParser format reward: fields present, spacing, start and end (module docs).

    ``fields`` defaults to ``["reasoning", "answer"]``."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    return XmlFormat(_fields(["reasoning", "answer"] if fields is None else fields), mode)


REWARD_SPECS = [
    RewardSpec(
        name="xml_format",
        factory=xml_format,
        example='''[rewards.xml]
use = "xml_format"
weight = 1.0
fields = ["reasoning", "answer"]   # a field may list alternatives: ["reasoning", ["code", "answer"]]
mode = "ordered"                   # ordered | verifiers (XMLParser's format reward term for term)
''',
    ),
]
