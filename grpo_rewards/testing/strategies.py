"""Hypothesis strategies for reward tests: completions, chat messages, rendered numbers, golds and their forms.

Numbers are rendered in many candidate forms and kept only where the project's number
grammar (:func:`grpo_rewards.answers.numbers.parse_number`) reads the same value back, so the
strategies follow the grammar instead of restating it. :func:`golds` draws a gold answer of every
kind (integers, decimals, fractions, tiny and huge magnitudes, units, percentages, sets, intervals,
expressions, option letters, code, JSON) with a right and a wrong form; :func:`right_completions`,
:func:`disguised_wrong` and :data:`PADDINGS` build the completions of the metamorphic properties
(:mod:`grpo_rewards.testing.metamorphic`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from grpo_rewards.answers.numbers import format_number, parse_number

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


@st.composite
def group_batches(draw: st.DrawFn, columns: dict[str, st.SearchStrategy] | None = None, max_groups: int = 3,
                  max_group: int = 5, completion: st.SearchStrategy | None = None) -> tuple[list, dict[str, list]]:
    """``(completions, columns)`` of a batch of groups, as a trainer hands a group reward one: each group's rows
    share a ``prompts`` value (text or chat messages, one per group) and their dataset columns, and its
    completions are drawn from a few per group, so answers repeat within a group as sampled answers do.
    The groups' rows are interleaved in any order."""
    comp = completion if completion is not None else st.one_of(completions(), chat())
    rows: list[tuple[Any, Any, dict[str, Any]]] = []
    for g in range(draw(st.integers(1, max_groups))):
        prompt = draw(st.sampled_from([f"prompt {g}", [{"role": "user", "content": f"prompt {g}"}]]))
        cells = {k: draw(s) for k, s in (columns or {}).items()}
        pool = draw(st.lists(comp, min_size=1, max_size=3))
        size = draw(st.integers(1, max_group))
        rows += [(prompt, draw(st.one_of(st.sampled_from(pool), comp)), cells) for _ in range(size)]
    rows = draw(st.permutations(rows))
    cols = {"prompts": [p for p, _, _ in rows], **{k: [c[k] for _, _, c in rows] for k in (columns or {})}}
    return [c for _, c, _ in rows], cols


# --- golds and their right forms, for the metamorphic properties (grpo_rewards.testing.metamorphic) -------------

#: the kinds of gold answers :func:`golds` draws
KINDS = ("integer", "decimal", "fraction", "tiny", "huge", "unit", "percent", "set", "interval", "expression",
         "letter", "code", "json")
#: the kinds whose right form is one number, which any number-reading reward must accept
NUMERIC_KINDS = ("integer", "decimal", "fraction", "tiny", "huge", "percent")


@dataclass(frozen=True)
class Gold:
    """A gold answer: its ``kind`` (:data:`KINDS`), the dataset's ``reference`` cell, a ``right`` form of it as a
    completion would write it, and a ``wrong`` answer of the same kind."""

    kind: str
    reference: str
    right: str
    wrong: str


def _sci(mantissa: Fraction, exponent: int, style: int) -> str:
    m = format_number(mantissa)
    return (f"{m}e{exponent}", f"{m}E{exponent}", f"{m} \\times 10^{{{exponent}}}", f"{m}\\cdot 10^{{{exponent}}}")[style]


@st.composite
def _numeric(draw: st.DrawFn, kind: str) -> Gold:
    if kind == "integer":
        v = draw(st.integers(-10**6, 10**6))
        right = draw(renderings(Fraction(v)))
        return Gold(kind, str(v), right, str(v + draw(st.sampled_from([1, -1, 10, 7]))))
    if kind == "decimal":
        places = draw(st.integers(1, 3))
        v = Fraction(draw(st.integers(-99_999, 99_999).filter(lambda n: n % 10)), 10**places)
        text = f"{float(v):.{places}f}"
        right = draw(st.sampled_from([text, text + "0", f"${text}$", f"\\boxed{{{text}}}"]))
        return Gold(kind, text, right, format_number(v + Fraction(1, 10**places)))
    if kind == "fraction":
        q = draw(st.sampled_from([3, 7, 9, 11, 12]))
        p = draw(st.integers(1, 50).filter(lambda n: n % q))
        right = draw(st.sampled_from([f"{p}/{q}", f"\\frac{{{p}}}{{{q}}}", f"\\dfrac{{{p}}}{{{q}}}", f"\\frac {{{p}}}{{{q}}}"]))
        return Gold(kind, f"\\frac{{{p}}}{{{q}}}", right, f"{p + 1}/{q}")
    if kind in ("tiny", "huge"):
        mantissa = Fraction(draw(st.integers(11, 99)), 10)
        exponent = draw(st.integers(-22, -7)) if kind == "tiny" else draw(st.integers(9, 30))
        reference = _sci(mantissa, exponent, 0)
        right = _sci(mantissa, exponent, draw(st.integers(0, 3)))
        off = draw(st.sampled_from(["zero", "magnitude", "digit"]))
        wrong = {"zero": "0", "magnitude": _sci(mantissa, exponent + draw(st.sampled_from([-2, -1, 1, 3])), 0),
                 "digit": _sci(mantissa + Fraction(1, 10), exponent, 0)}[off]
        return Gold(kind, reference, right, wrong)
    assert kind == "percent"
    p = draw(st.integers(1, 99))
    right = draw(st.sampled_from([f"{p}%", f"{p}\\%", f"{p} percent"]))
    return Gold(kind, f"{p}%", right, f"{p + 1}%")


@st.composite
def _structured(draw: st.DrawFn, kind: str) -> Gold:
    if kind == "unit":
        v = draw(st.integers(2, 999))
        unit = draw(st.sampled_from(["km", "kg", "cm", "m", "hours"]))
        right = draw(st.sampled_from([f"{v} {unit}", f"{v}{unit}", f"{v}\\text{{ {unit}}}"]))
        reference = draw(st.sampled_from([f"{v} {unit}", f"{v}{unit}"]))
        return Gold(kind, reference, right, f"{v + 1} {unit}")
    if kind == "set":
        a, b = sorted(draw(st.lists(st.integers(-20, 20), min_size=2, max_size=2, unique=True)))
        right = draw(st.sampled_from([f"{b}, {a}", f"{a}, {b}", f"\\{{{b}, {a}\\}}"]))
        return Gold(kind, f"{a}, {b}", right, f"{a}, {b + 1}")
    if kind == "interval":
        a = draw(st.integers(-20, 20))
        b = a + draw(st.integers(1, 20))
        right = draw(st.sampled_from([f"({a}, {b}]", f"({a},{b}]", f"\\left({a}, {b}\\right]"]))
        return Gold(kind, f"({a}, {b}]", right, f"[{a}, {b}]")
    if kind == "expression":
        a = draw(st.integers(2, 9))
        c = draw(st.integers(1, 9))
        right = draw(st.sampled_from([f"{a}x + {c}", f"{c} + {a}x", f"{a} x+{c}", f"{c}+{a}\\cdot x"]))
        return Gold(kind, f"{a}x + {c}", right, f"{a}x - {c}")
    if kind == "letter":
        letter = draw(st.sampled_from("ABCDE"))
        right = draw(st.sampled_from([letter, f"({letter})", f"**{letter}**"]))
        return Gold(kind, letter, right, "ABCDE"[("ABCDE".index(letter) + 1) % 5])
    if kind == "code":
        k = draw(st.integers(2, 9))
        return Gold(kind, f"f({k}) == {2 * k}", "def f(x):\n    return 2 * x\n",
                    f"def f(x):\n    return 2 * x + {k}\n")
    assert kind == "json"
    key = draw(st.sampled_from(["a", "name", "total"]))
    v = draw(st.integers(0, 99))
    return Gold(kind, '{"type": "object"}', f'{{"{key}": {v}}}', f'{{"{key}": {v},}}')


def golds(kinds: tuple[str, ...] = KINDS) -> st.SearchStrategy[Gold]:
    """A gold answer of one of ``kinds`` with a right and a wrong form (:class:`Gold`)."""
    return st.sampled_from(kinds).flatmap(lambda k: _numeric(k) if k in NUMERIC_KINDS else _structured(k))


#: answer markers: each holds one answer; every reward that reads answers accepts each
MARKERS = ("<answer>{}</answer>", "<answer>\n{}\n</answer>", "\\boxed{{{}}}", "#### {}", "Final answer: {}",
           "Answer: {}", "**Final Answer:** {}", "<answer>The answer is {}.</answer>")
#: sentences and languages that announce one number (or an option letter)
SENTENCES = ("The answer is {}.", "So the final answer is {}.", "Therefore, the answer is {}.",
             "The final answer is: {}", "La respuesta final es {}.", "Die Antwort ist {}.", "答案是 {}")
#: sentences in languages written with a decimal comma: a decimal answer there may be written with one ("3,5")
DECIMAL_COMMA_SENTENCES = ("La respuesta es {}.", "La réponse est {}.", "Die Antwort ist {}.", "A resposta é {}.",
                           "La risposta è {}.", "Ответ: {}.")
#: wrappers of the answer itself
WRAPPERS = ("{}", "${}$", "\\({}\\)", "**{}**", "$\\boxed{{{}}}$")
#: the answer forms of the model families users train
TEMPLATES = {
    "Minerva": "We compute it step by step.\nFinal Answer: The final answer is ${}$. I hope it is correct.",
    "Qwen2.5-Math": "Let's think step by step. First, 3 + 4 = 7.\nSo the answer is $\\boxed{{{}}}$.",
    "DeepSeek-R1": "<think>\nFirst 3 + 4 = 7, then 7 * 2 = 14. Maybe 15?\n</think>\n\n**Final Answer**\n\\[\n\\boxed{{{}}}\n\\]",
    "Llama-3": "## Step 1: Compute\n3 + 4 = 7.\n\nThe final answer is: $\\boxed{{{}}}$",
    "SmolLM2": "<reasoning>\n3 + 4 = 7, and 7 * 2 = 14.\n</reasoning>\n<answer>\n{}\n</answer>",
}


def right_completions(gold: Gold) -> st.SearchStrategy[str]:
    """Completions that answer ``gold`` rightly: its right form in any marker, sentence, wrapper or template."""
    kind = gold.kind
    if kind in ("json", "code"):  # text a parser reads whole: in a fence, never in math
        fence = "json" if kind == "json" else "python"
        frames = [f"```{fence}\n{{}}\n```", f"Here it is:\n```{fence}\n{{}}\n```\nDone.",
                  f"<think>\nA draft.\n</think>\n```{fence}\n{{}}\n```", f"```{fence}\n{{}}\n```\nRun it:\n```\nx\n```"]
        return st.sampled_from(frames).map(lambda frame: frame.format(gold.right))
    math_ok = kind not in ("letter", "unit")
    wrappers = WRAPPERS if math_ok else ("{}", "**{}**")
    frames = list(MARKERS) + list(TEMPLATES.values())
    if kind in NUMERIC_KINDS or kind == "letter":
        frames += SENTENCES
    if kind in ("set", "interval", "expression", "unit"):  # a list or text: the explicit markers hold it whole
        frames = [f for f in frames if not f.startswith(("#### ", "Answer: ", "<answer>The"))] + ["\\boxed{{{}}}"]
    framed = st.tuples(st.sampled_from(frames), st.sampled_from(wrappers)).map(lambda fw: _frame(gold.right, *fw))
    if kind == "decimal" and len(gold.reference.partition(".")[2]) != 3:  # ",ddd" is a thousands group everywhere
        comma = gold.reference.replace(".", ",")
        return st.one_of(framed, st.sampled_from(DECIMAL_COMMA_SENTENCES).map(lambda f: f.format(comma)))
    return framed


def _frame(answer: str, frame: str, wrapper: str) -> str:
    """``answer`` in ``wrapper``, in ``frame``; a frame that is math already (``$...$``, ``\\boxed``) takes it bare."""
    if "$" in frame or "\\[" in frame or "boxed" in frame:
        wrapper = "{}"
    return frame.format(wrapper.format(answer))


def disguised_wrong(gold: Gold) -> st.SearchStrategy[str]:
    """Completions whose answer is ``gold.wrong`` while the right value is written where no answer is: a hedge, a
    revision to the wrong value, a quoted or negated claim, a postscript, a draft in the reasoning."""
    r, w = gold.right, gold.wrong
    forms = [
        f"<answer>{w}</answer>\nSo \\boxed{{{r}}}",
        f"#### {w}\n#### {r}",
        f"Final answer: {w}\nFinal answer: {r}",
        f"\\boxed{{{w}}} or maybe \\boxed{{{r}}}",
        f"The answer is {r}. Wait, actually, after checking, the answer is {w}.",
        f'My friend said "the answer is {r}", but the answer is {w}.',
        f"<think>\nThe answer is {r}.\n</think>\nThe answer is {w}.",
        f"<think>\n\\boxed{{{r}}}\n</think>\nI cannot solve this.",
        f"<reasoning>\n<answer>{r}</answer>\n</reasoning>\nI am not sure.",
        f"<think>The answer is {r}",
    ]
    if gold.kind in NUMERIC_KINDS:
        forms += [f"The answer is {w} or {r}.", f"The answer is at least {r}.", f"<answer>{w} or {r}</answer>",
                  f"So it is {w}, not {r}.", f"The answer is {w}.\n\nP.S. Some people get {r}.",
                  f"The answer is {r} (or {w} if we count again)."]
    if gold.kind == "integer":  # "12,5" outside a decimal-comma context: a decimal or a list, never its 12
        forms += [f"The answer is {gold.reference},5.", f"So we get {gold.reference},25 in all."]
    return st.sampled_from(forms)


#: paddings, each ``(text, times) -> padded text``: repeating one unit of padding ``times`` times adds no content, so
#: a score may not grow with ``times`` (a reward may count the unit once, as content keeps a repeated unit once)
PADDINGS: dict[str, Callable[[str, int], str]] = {
    "blank lines": lambda t, n: t + "\n" * (2 * n),
    "spaces": lambda t, n: t.replace(" ", " " * (n + 1)),
    "a repeated sentence": lambda t, n: "Let me double check.\n" * n + t,
    "a numbered list": lambda t, n: "".join(f"{i}. Let me check.\n" for i in range(1, n + 1)) + t,
    "list numbers alone": lambda t, n: "".join(f"{i}.\n" for i in range(1, n + 1)) + t,
    "a loop without spaces": lambda t, n: "checkcheck" * n + "\n" + t,
    "a CJK loop": lambda t, n: "让我再检查一遍" * n + "\n" + t,
    "a word loop": lambda t, n: "wait " * n + t,
}


def paddings() -> st.SearchStrategy[str]:
    """The name of one padding of :data:`PADDINGS`."""
    return st.sampled_from(sorted(PADDINGS))
