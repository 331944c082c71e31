"""Hypothesis strategies for reward tests: completions, chat messages, rendered numbers.

Numbers are rendered in many candidate forms and kept only where the project's number
grammar (:func:`grpo_rewards.numbers.parse_number`) reads the same value back, so the
strategies follow the grammar instead of restating it.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from grpo_rewards.numbers import format_number, parse_number

_TAGS = ("reasoning", "think", "answer")


def _renderings(value: Fraction) -> list[str]:
    canon = format_number(value)
    forms = [canon, f"${canon}$", f"\\boxed{{{canon}}}", f"\\({canon}\\)", f"{canon}."]
    if value.denominator == 1:
        n = value.numerator
        forms += [f"{n:,}", f"{float(n)}", f"+{n}" if n >= 0 else f"\u2212{-n}"]
    else:
        forms += [f"\\frac{{{value.numerator}}}{{{value.denominator}}}", f"{value.numerator}/{value.denominator}"]
    return [f for f in forms if parse_number(f) == value]


def numbers() -> st.SearchStrategy[Fraction]:
    """Exact numbers: integers and fractions with small denominators."""
    return st.one_of(
        st.integers(-10**6, 10**6).map(Fraction),
        st.builds(Fraction, st.integers(-999, 999), st.sampled_from([2, 4, 5, 8, 10, 3, 7])),
    )


def renderings(value: Fraction) -> st.SearchStrategy[str]:
    """The texts the grammar reads as ``value`` (``1,234``, ``\\boxed{1234}``, ``3/4``, ``0.75``...)."""
    return st.sampled_from(_renderings(value))


@st.composite
def rendered_numbers(draw: st.DrawFn) -> tuple[Fraction, str]:
    """``(value, text)`` where the grammar reads ``text`` as ``value``."""
    value = draw(numbers())
    return value, draw(renderings(value))


def words(max_size: int = 40) -> st.SearchStrategy[str]:
    """Free text, unicode included."""
    return st.text(max_size=max_size)


@st.composite
def well_formed(draw: st.DrawFn) -> str:
    """``<reasoning>...</reasoning>\\n<answer>N</answer>``."""
    _, num = draw(rendered_numbers())
    return f"<reasoning>\n{draw(words())}\n</reasoning>\n<answer>\n{num}\n</answer>\n"


@st.composite
def adversarial(draw: st.DrawFn) -> str:
    """The shapes that break parsers: duplicated or empty tags, answers in the reasoning, headings, huge input."""
    _, num = draw(rendered_numbers())
    tag = draw(st.sampled_from(_TAGS))
    return draw(
        st.sampled_from(
            [
                f"<answer>{num}</answer><answer>{num}</answer>",
                "<answer></answer>",
                f"<reasoning>the answer is {num}</reasoning><answer></answer>",
                f"# Answer\n\n**{num}**",
                f"<{tag}>{num}",
                f"</{tag}>{num}<{tag}>",
                num * 5000,
                "",
                "\x00\ud7ff\u202e" + num,
            ]
        )
    )


def completions() -> st.SearchStrategy[str]:
    """Any completion: well-formed, near-miss, adversarial or junk."""
    return st.one_of(well_formed(), adversarial(), words(200))


def chat(content: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[list[dict[str, str]]]:
    """A conversational completion: a list of one assistant message."""
    return (completions() if content is None else content).map(lambda c: [{"role": "assistant", "content": c}])


def junk_completions() -> st.SearchStrategy[object]:
    """Completions a reward must score without raising: any text, adversarial shapes, and chat lists with an
    empty, ``None`` or multimodal content, no assistant message's text, or no message at all."""
    text = st.one_of(adversarial(), words(200))
    return st.one_of(
        text,
        chat(text),
        st.builds(list),
        st.builds(lambda: [{"role": "assistant", "content": None}]),
        st.builds(lambda: [{"role": "assistant"}]),
        text.map(lambda t: [{"role": "assistant", "content": [{"type": "text", "text": t}, {"type": "image"}]}]),
    )


def junk_values() -> st.SearchStrategy[object]:
    """Dataset cells a reward must tolerate: missing (``None``, NaN: a pandas gap, blank), numbers, any text."""
    return st.one_of(st.none(), st.just(float("nan")), st.sampled_from(["", " ", "\n"]), st.integers(),
                     st.floats(allow_nan=False), words(60), adversarial())


@st.composite
def batches(draw: st.DrawFn, columns: dict[str, st.SearchStrategy] | None = None,
            max_size: int = 6) -> tuple[list, dict[str, list]]:
    """``(completions, columns)`` with every dataset column as long as the batch."""
    n = draw(st.integers(1, max_size))
    comps = draw(st.lists(st.one_of(completions(), chat()), min_size=n, max_size=n))
    cols = {k: draw(st.lists(s, min_size=n, max_size=n)) for k, s in (columns or {}).items()}
    return comps, cols
