"""Code extraction: the last fenced block of the configured language in a completion.

The reasoning block is no code (:func:`grpo_rewards.answers.strip_reasoning`: a draft inside ``<think>``
followed by a refusal has no code). A block tagged with the language (or one of its fence tags,
:mod:`~grpo_rewards.sandbox.languages`: ``py``, ``python3``...) wins; when the completion has no tagged
block at all, its last untagged block is used (:func:`grpo_rewards.answers.last_block`). An unclosed
fence (a truncated generation) is not code. No block gives ``None`` and a reason.
:func:`without_main_block` leaves out a Python demo after the solution when its functions are tested.
"""

from __future__ import annotations

import re

from grpo_rewards.answers import last_block, strip_reasoning
from grpo_rewards.sandbox import languages


def extract_code(text: str, language: str = "python") -> tuple[str | None, str]:
    """``(code, reason)``: the code, or ``None`` and why there is none."""
    block = last_block(strip_reasoning(text), languages.fence_tags(language))
    if block is None:
        return None, f"no fenced ```{language} block in the completion"
    if not block.body.strip():
        return None, "the last code block is empty"
    return block.body, ""


_MAIN_GUARD = re.compile(r"""^if[ \t(]+__name__[ \t]*==[ \t]*(['"])__main__\1[ \t)]*:""", re.MULTILINE)


def without_main_block(code: str) -> str:
    """Python ``code`` without its top-level ``if __name__ == "__main__":`` blocks (a demo after the solution).

    A function's tests import the solution as a module, as the peers' harnesses do (APPS and TACO load it
    as a module, where ``__name__`` is not ``"__main__"``): its demo must not run, read stdin or print
    into the runner's output. The block is the guard line and every indented or blank line after it."""
    if "__main__" not in code:
        return code
    out: list[str] = []
    pos = 0
    for guard in _MAIN_GUARD.finditer(code):
        if guard.start() < pos:
            continue
        out.append(code[pos:guard.start()])
        end = code.find("\n", guard.end())
        while end >= 0:
            line_end = code.find("\n", end + 1)
            line = code[end + 1:line_end if line_end >= 0 else len(code)]
            if line.strip() and not line[:1].isspace():
                break
            end = line_end
        pos = len(code) if end < 0 else end + 1
    out.append(code[pos:])
    return "".join(out)
