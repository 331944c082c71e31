"""``email_rules``: a rule-based reward for writing emails, the sum of five rules.

The rules and their exact definitions are in :func:`email_rules`'s docstring
(what ``grpo rewards show email_rules`` prints); signature blocks and contact
details are found by :mod:`grpo_rewards.builtins.email_signature`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from grpo_rewards.builtins.email_signature import has_contact, split_signature
from grpo_rewards.completions import completion_text
from grpo_rewards.extras import import_extra
from grpo_rewards.specs import RewardSpec

TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam", "mx"})
_NAME_SPLIT = re.compile(r"[\s.,\-]+")


def _keyword_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    elif not isinstance(value, (list, tuple)):
        value = [value]
    return [str(k).strip() for k in value if k is not None and str(k).strip()]


@functools.lru_cache(maxsize=4096)
def _word_pattern(word: str) -> re.Pattern[str]:
    left = r"\b" if re.match(r"\w", word) else ""
    right = r"\b" if re.search(r"\w$", word) else ""
    return re.compile(left + re.escape(word) + right, re.IGNORECASE)


def keyword_share(text: str, keywords: list[str]) -> float:
    """The share of ``keywords`` found in ``text`` (whole words, any case); 1.0 for no keywords."""
    if not keywords:
        return 1.0
    return sum(_word_pattern(k).search(text) is not None for k in keywords) / len(keywords)


def name_parts(name: str) -> list[str]:
    return [p for p in _NAME_SPLIT.split(name) if len(p) > 1 and p.lower() not in TITLES]


# the greeting: the first line when it opens with a salutation, or a vocative (up to four capitalised
# words, or one word of a script without capitals, then , : or !) opening the email
_GREETING = re.compile(
    r"\A\s*(?:(?i:dear|hi|hello|hey|greetings|good\s+(?:morning|afternoon|evening)|to)\b[^\n]*"
    r"|(?:(?:[A-Z][\w'.-]*[ \t]+){0,3}[A-Z][\w'.-]*|[^\W\d_A-Za-z]\w*)[ \t]*[,:!，：！،])",
)
_OPENING_MARKS = " \t\"'“‘(*_-"


def _starts_sentence(body: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence: only quotes, brackets or spaces since a sentence end,
    a line break or the start of the text (looked for in the 80 characters before it)."""
    before = body[max(0, start - 80):start].rstrip(_OPENING_MARKS)
    return not before or before[-1] in ".!?\n"


def _cased(ch: str) -> bool:
    return ch.lower() != ch.upper()


@functools.lru_cache(maxsize=4096)
def _name_pattern(part: str) -> re.Pattern[str]:
    """A name part as a name: capitalised as the name is, at word boundaries where its
    script has words of cased letters (a Chinese or Arabic name is matched as written)."""
    forms = {part, part[:1].upper() + part[1:]}
    left = r"(?<!\w)" if _cased(part[0]) else ""
    right = r"(?!\w)" if _cased(part[-1]) else ""
    return re.compile(left + "(?:" + "|".join(map(re.escape, sorted(forms))) + ")" + right)


def names_recipient(body: str, parts: list[str]) -> bool:
    """A part of the recipient's name is written in ``body`` as a name: capitalised, a whole word, and
    either in the greeting or not at the start of a sentence (where any word is capitalised)."""
    greeting = _GREETING.match(body)
    end = greeting.end() if greeting else 0
    for part in parts:
        if not _cased(part[0]):  # no capitals to tell a name from a word: as written, anywhere
            if _name_pattern(part).search(body):
                return True
            continue
        for found in _name_pattern(part).finditer(body):
            if found.start() < end or not _starts_sentence(body, found.start()):
                return True
    return False


def _normalize(text: str) -> str:
    return " ".join(text.split())


def email_rules(
    keyword_reward: float = 1.0,
    keyword_partial: bool = False,
    exact_reward: float = 1.0,
    too_long_penalty: float = -1.0,
    max_words: int = 250,
    name_reward: float = 1.0,
    signature_reward: float = 1.0,
    phone_region: str = "US",
    keywords_column: str = "keywords",
    ideal_column: str = "ideal",
    recipient_column: str = "recipient",
) -> EmailRules:
    """Rule-based email reward: keywords, exact ideal reply, length, recipient's name, signature with contact.

    =============  ==========================================================  ===================
    rule           when it fires                                               amount (parameter)
    =============  ==========================================================  ===================
    keywords       every keyword of the row's ``keywords`` column appears      ``keyword_reward``
    exact          the email equals the row's ``ideal`` reply                  ``exact_reward``
    too long       the email has more than ``max_words`` words                 ``too_long_penalty``
    name           a part of the row's ``recipient`` name appears in the body  ``name_reward``
    signature      the signature block holds a phone, email or postal address  ``signature_reward``
    =============  ==========================================================  ===================

    Details:

    * A rule whose column is missing, or whose value is ``None`` or empty in a row,
      does not apply to that row (it adds 0). ``too long`` and ``signature`` read no
      column and always apply (``max_words = 0`` turns ``too long`` off).
    * keywords: a list of strings, or one string of comma-separated keywords. Matched
      case-insensitively, as whole words where the keyword starts/ends with a letter
      or digit. With ``keyword_partial = true`` the rule scores ``keyword_reward``
      times the share of keywords present instead of all-or-nothing.
    * exact: both texts are compared after stripping and collapsing each run of
      whitespace to one space; case matters.
    * words: whitespace-separated tokens (``str.split``).
    * name: the recipient's name is split into parts on spaces, dots, commas and
      hyphens; titles (Mr, Mrs, Ms, Mx, Miss, Dr, Prof, Sir, Madam) and one-letter parts
      are dropped; the rule fires when a remaining part is written as a name in the body
      (the email before its signature block): capitalised as in the recipient column (its
      first letter a capital), as a whole word, and either in the greeting (the first line, when it
      opens with Dear, Hi, Hello, Hey, Greetings, Good morning/afternoon/evening or To, or
      up to four capitalised words then ``,`` ``:`` or ``!`` opening the email: ``Grace,``)
      or not at the start of a sentence.
      So "I will call" does not name Grace Will, nor does "Will you call?"; "Hi Grace,"
      and "as Will said" do. A name in a script without capitals (Chinese, Arabic) is
      matched as written, anywhere in the body.
    * signature block: the lines after the last closing line, a line holding only
      ``--`` or a closing such as ``Best regards,`` ``Kind regards`` ``Thanks!``
      ``Thank you`` ``Sincerely`` ``Cheers`` (the full list is in
      :mod:`grpo_rewards.builtins.email_signature`); no closing line, no block.
      Contact details: a valid phone number found by ``phonenumbers`` (numbers
      without ``+`` country code read in ``phone_region``), an email address, or a
      postal address (house number + street type such as ``12 Baker Street``,
      ``City, ST 12345``, a UK postcode, ``P.O. Box 12``).

    With non-negative rewards and a non-positive penalty a score lies in
    ``[too_long_penalty, keyword_reward + exact_reward + name_reward + signature_reward]``.
    A completion that is not text or chat messages scores ``None``.
    """
    return EmailRules(
        keyword_reward=keyword_reward, keyword_partial=keyword_partial, exact_reward=exact_reward,
        too_long_penalty=too_long_penalty, max_words=max_words, name_reward=name_reward,
        signature_reward=signature_reward, phone_region=phone_region, keywords_column=keywords_column,
        ideal_column=ideal_column, recipient_column=recipient_column,
    )


class EmailRules:
    """The batch reward :func:`email_rules` returns (a module-level class: it pickles)."""

    __name__ = "email_rules"

    def __init__(self, *, keyword_reward: float, keyword_partial: bool, exact_reward: float, too_long_penalty: float,
                 max_words: int, name_reward: float, signature_reward: float, phone_region: str,
                 keywords_column: str, ideal_column: str, recipient_column: str):
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 0:
            raise ValueError(f"max_words must be a whole number >= 0 (0 = no limit), got {max_words!r}")
        phonenumbers = import_extra("email", "phonenumbers", "email_rules")
        if phone_region.upper() not in phonenumbers.SUPPORTED_REGIONS:
            raise ValueError(f"phone_region must be a two-letter region code such as 'US' or 'GB', got {phone_region!r}")
        self.keyword_reward, self.keyword_partial, self.exact_reward = keyword_reward, keyword_partial, exact_reward
        self.too_long_penalty, self.max_words = too_long_penalty, max_words
        self.name_reward, self.signature_reward, self.region = name_reward, signature_reward, phone_region.upper()
        self.keywords_column, self.ideal_column, self.recipient_column = keywords_column, ideal_column, recipient_column

    def score(self, text: str, keywords: Any, ideal: Any, recipient: Any) -> float:
        total = 0.0
        wanted = _keyword_list(keywords)
        if wanted:
            share = keyword_share(text, wanted)
            total += self.keyword_reward * share if self.keyword_partial else (self.keyword_reward if share == 1.0 else 0.0)
        if isinstance(ideal, str) and ideal.strip() and _normalize(text) == _normalize(ideal):
            total += self.exact_reward
        if self.max_words and len(text.split()) > self.max_words:
            total += self.too_long_penalty
        body, block = split_signature(text)
        parts = name_parts(recipient) if isinstance(recipient, str) else []
        if parts and names_recipient(body, parts):
            total += self.name_reward
        if block and has_contact(block, self.region):
            total += self.signature_reward
        return total

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        n = len(completions)

        def column(name: str) -> list[Any]:
            values = columns.get(name)
            if values is None:
                return [None] * n
            if len(values) != n:
                raise ValueError(f"{n} completions but {len(values)} values in column {name!r}")
            return list(values)

        out: list[float | None] = []
        for completion, kw, ideal, recipient in zip(
            completions, column(self.keywords_column), column(self.ideal_column), column(self.recipient_column),
            strict=True,
        ):
            try:
                text = completion_text(completion)
            except TypeError:
                out.append(None)
                continue
            out.append(self.score(text, kw, ideal, recipient))
        return out


REWARD_SPECS = [
    RewardSpec(
        name="email_rules",
        factory=email_rules,
        columns=("keywords", "ideal", "recipient"),
        example='''[rewards.email]
use = "email_rules"
keyword_reward = 1.0     # every keyword of the row's `keywords` appears
exact_reward = 1.0       # the reply equals the row's `ideal` (whitespace-normalized)
too_long_penalty = -1.0  # added when the reply has more than max_words words
max_words = 250
name_reward = 1.0        # the row's `recipient` is named in the body
signature_reward = 1.0   # a signature block with a phone number, email or postal address
phone_region = "US"      # how numbers without +country code are read
''',
    ),
]
