"""Single-valued attributes of the user, found in third-person memory text.

"Maya lives in Tokyo" and "Maya and family moved to Osaka" both speak of the
attribute ``residence``; a new value for the same attribute of the same
subject is an UPDATE. Patterns run on text already rewritten to the third
person, so the same code reads new statements and stored memories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PLACE = r"(?P<v>[A-Z][\w'-]*(?:\s+(?:[A-Z][\w'-]*|de|del|la|upon|on))*)"
_JOBS = (
    r"engineer|developer|programmer|nurse|teacher|doctor|manager|designer|scientist|analyst|lawyer|writer|"
    r"student|consultant|accountant|chef|architect|researcher|professor|pharmacist|electrician|journalist|"
    r"photographer|artist|musician|librarian|dentist|firefighter|police officer|intern|founder|director|"
    r"administrator|technician|therapist|mechanic|pilot|salesperson|baker|farmer"
)
_ADV = r"(?:\s+(?:now|currently|still|just|recently|finally|officially|\w+ly))*"


@dataclass(frozen=True)
class AttributeValue:
    name: str
    value: str
    #: a stative form ("lives in X", "works as X"): a new value can be substituted in place
    stative: bool
    span: tuple[int, int]


@dataclass(frozen=True)
class _Pattern:
    name: str
    regex: str  # ``{S}`` is the subject alternation
    stative: bool
    flags: int = 0


_PATTERNS = (
    _Pattern(
        "residence",
        r"{S}" + _ADV + r"\s+(?:lives|live|is living|are living|resides|reside)\s+in\s+" + _PLACE,
        True,
    ),
    _Pattern("residence", r"{S}" + _ADV + r"\s+(?:is|are)\s+based\s+in\s+" + _PLACE, True),
    _Pattern(
        "residence",
        r"{S}"
        + _ADV
        + r"\s+(?:has |have )?(?:just |finally )?(?:moved|relocated)(?:\s+\w+)?\s+to\s+"
        + _PLACE,
        False,
    ),
    _Pattern(
        "employer", r"{S}" + _ADV + r"\s+(?:works|work|is working|has worked)\s+(?:at|for)\s+" + _PLACE, True
    ),
    _Pattern(
        "job_title",
        r"{S}"
        + _ADV
        + r"\s+(?:works|work|is working)\s+as\s+(?:an?\s+)?"
        + r"(?P<v>[a-z][a-z -]*?)(?=\s+(?:at|for|in|with)\b|[,.;!]|$)",
        True,
    ),
    _Pattern(
        "job_title",
        r"{S}" + _ADV + r"\s+is\s+(?:an?\s+)?(?P<v>(?:[a-z-]+\s+){0,3}?(?:" + _JOBS + r"))\b",
        True,
    ),
    _Pattern(
        "job_title",
        r"{S}" + _ADV + r"\s+(?:has\s+)?(?:started|began|begun|starts)\s+(?:work(?:ing)?\s+)?as\s+(?:an?\s+)?"
        r"(?P<v>[a-z][a-z -]*?)(?=\s+(?:at|for|in|with)\b|[,.;!]|$)",
        False,
    ),
    _Pattern(
        "job_title",
        r"{S}" + _ADV + r"\s+(?:got\s+|was\s+|has been\s+|have been\s+)?promoted\s+to\s+(?:an?\s+)?"
        r"(?P<v>[a-z][a-z -]*?)(?=\s+(?:at|for|in|on|with)\b|[,.;!]|$)",
        False,
    ),
    _Pattern(
        "diet",
        r"{S}" + _ADV + r"\s+is\s+(?:an?\s+)?(?P<v>vegetarian|vegan|pescatarian|flexitarian|omnivore)\b",
        True,
    ),
    _Pattern(
        "relationship_status",
        r"{S}" + _ADV + r"\s+(?:is|got)\s+(?P<v>married|single|engaged|divorced|widowed)\b",
        True,
    ),
    _Pattern("age", r"{S}" + _ADV + r"\s+is\s+(?P<v>\d{1,3})(?:\s+years?\s+old)?\b", True),
    _Pattern("name", r"{S}'s\s+name\s+is\s+(?P<v>[A-Z][\w-]*)", True),
    _Pattern(
        "favourite",
        r"{S}'s\s+(?:all-time\s+)?favou?rite\s+(?P<k>\w+(?:\s+\w+)?)\s+is\s+(?P<v>[^,.;!]+)",
        True,
    ),
)


def _subject(subject: str) -> str:
    names = {re.escape(subject), "[Tt]he user"}
    return r"\b(?:" + "|".join(sorted(names)) + r")(?:\s+and\s+family)?"


def find_attributes(text: str, subject: str) -> list[AttributeValue]:
    """Every attribute of ``subject`` stated in ``text`` (first match per attribute)."""
    found: dict[str, AttributeValue] = {}
    subj = _subject(subject)
    for pattern in _PATTERNS:
        for m in re.finditer(pattern.regex.replace("{S}", subj), text, pattern.flags):
            name = pattern.name
            if "k" in m.groupdict() and m.group("k"):
                name = f"favourite:{m.group('k').lower()}"
            if name in found:
                continue
            value = m.group("v").strip()
            found[name] = AttributeValue(name, value, pattern.stative, m.span("v"))
    return list(found.values())


def same_value(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()
