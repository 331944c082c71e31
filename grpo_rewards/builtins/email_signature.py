"""Find an email's signature block and whether it holds contact details (phone, email address, postal address).

Signature block
    The lines after the *last* closing line. A closing line is, once stripped and
    compared case-insensitively, one of: ``--`` (the usenet signature separator),
    ``Best regards``, ``Kind regards``, ``Warm regards``, ``Warmest regards``,
    ``Regards``, ``Best``, ``Best wishes``, ``All the best``, ``Sincerely``,
    ``Yours sincerely``, ``Sincerely yours``, ``Yours truly``, ``Yours faithfully``,
    ``Respectfully``, ``Thanks``, ``Thanks again``, ``Thank you``, ``Many thanks``,
    ``Cheers``, ``Take care``, each optionally followed by one ``,`` ``.`` ``!``
    or ``-`` and nothing else on the line. No closing line means no signature
    block (a phone number in the body is not a signature).

Contact details (any one is enough)
    phone          a valid number found by ``phonenumbers.PhoneNumberMatcher``
                   (Google's libphonenumber); numbers without a ``+`` country code
                   are read in ``region`` (an ISO 3166 code such as ``US``, ``GB``)
    email address  ``local@domain.tld`` (local part of letters, digits and
                   ``._%+-``; a domain of dot-separated labels; a TLD of 2+ letters)
    postal address by its shape: a house number, then up to four capitalised
                   words or numbers, then a capitalised street type (``12 Baker Street``,
                   ``1600 Pennsylvania Ave NW``, ``12 W 34th St``; ``2 weeks on the way``
                   is prose, not an address), a German-style street and number
                   (``Hauptstraße 5``, ``Lindenweg 12a``), a French-style number and
                   street (``12 rue de la Paix``), a US ``City, ST 12345`` line, a UK
                   postcode (``NW1 6XE``) or a ``P.O. Box 123``
"""

from __future__ import annotations

import re

_CLOSING = re.compile(
    r"^[ \t]*(?:--|(?:best|kind|warm|warmest)[ \t]+regards|regards|best(?:[ \t]+wishes)?|all[ \t]+the[ \t]+best"
    r"|(?:yours[ \t]+)?sincerely(?:[ \t]+yours)?|yours[ \t]+(?:truly|faithfully)|respectfully"
    r"|thanks(?:[ \t]+again)?|thank[ \t]+you|many[ \t]+thanks|cheers|take[ \t]+care)[ \t]*[,.!-]?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_STREET_TYPES = ["street", "st", "avenue", "ave", "road", "rd", "boulevard", "blvd", "lane", "ln", "drive", "dr",
                 "way", "court", "ct", "place", "pl", "square", "sq", "terrace", "parkway", "pkwy", "highway", "hwy",
                 "circle", "cir"]
_STREET_TYPE = "|".join(f"{t.capitalize()}|{t.upper()}" for t in _STREET_TYPES)  # capitalised, as in an address
_ADDRESS_PATTERNS = (
    # 221B Baker Street, 1600 Pennsylvania Ave NW, 12 W 34th St: the words and the type capitalised
    re.compile(rf"\b\d{{1,6}}[A-Za-z]?\s+(?:(?:[A-Z][A-Za-z.'-]*|\d+(?:st|nd|rd|th)?)\s+){{0,4}}(?:{_STREET_TYPE})\b\.?"),
    re.compile(r"\b[A-ZÄÖÜ][\w.-]*(?:straße|strasse|str\.|weg|gasse|platz|allee|damm)\s+\d{1,5}[a-z]?\b"),  # Hauptstraße 5
    re.compile(r"\b\d{1,5}(?:\s?(?:bis|ter))?,?\s+(?:rue|avenue|boulevard|bd|place|chemin|allée|impasse|quai)\s+"
               r"(?:(?:de|du|des|la|le)\s+|d'|l')*[A-ZÉÈ]"),  # 12 rue de la Paix
    re.compile(r"\b[A-Z][A-Za-z .'-]*,\s*[A-Z]{2}\s+\d{5}(?:-\d{4})?\b"),  # Springfield, IL 62704
    re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s+\d[A-Z]{2}\b"),  # NW1 6XE (capitals only)
    re.compile(r"\bP\.?\s?O\.?\s+Box\s+\d+", re.IGNORECASE),  # P.O. Box 12
)


def split_signature(text: str) -> tuple[str, str]:
    """``(body, signature_block)``; the block is ``""`` when no closing line ends the body (see module docs)."""
    closings = list(_CLOSING.finditer(text))
    if not closings:
        return text, ""
    last = closings[-1]
    return text[: last.start()], text[last.end() :].strip()


def has_phone(text: str, region: str) -> bool:
    import phonenumbers  # 40 ms: imported when first needed, not when the plugin registers

    return any(True for _ in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID))


def has_email(text: str) -> bool:
    return _EMAIL.search(text) is not None


def has_address(text: str) -> bool:
    return any(p.search(text) for p in _ADDRESS_PATTERNS)


def contact_kinds(block: str, region: str = "US") -> list[str]:
    """Which kinds of contact detail ``block`` holds: a sublist of ``["phone", "email", "address"]``."""
    kinds = []
    if block and has_phone(block, region):
        kinds.append("phone")
    if block and has_email(block):
        kinds.append("email")
    if block and has_address(block):
        kinds.append("address")
    return kinds


def has_contact(block: str, region: str = "US") -> bool:
    """Whether ``block`` holds any contact detail (the cheap regex checks run before phonenumbers)."""
    return bool(block) and (has_email(block) or has_address(block) or has_phone(block, region))
