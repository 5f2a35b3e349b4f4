""" "Her", "him" and "there" said of someone or somewhere the speaker named before.

"My sister Aiko is visiting in July. We want to take her to Nara." is, read alone later,
about no one: the memory says "take my sister Aiko to Nara". "My brother moved to
Auckland. I'm flying out there in December." says "flying out to Auckland". The
referent is the last person of the pronoun's gender (or a person word that has none:
"my friend", "my boss") and the last place the speaker named, in what they said before
(this message's earlier sentences first, then their last turns). A clause that names
its own referent before the pronoun ("my mum loves her garden") is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memstack.adapters.llm.rules.grammar import word_set
from memstack.domain.time.calendar_words import MONTH_NAMES, WEEKDAY_NAMES

_FEMALE = (
    "mum mom mother grandmother grandma gran nan sister wife daughter aunt niece girlfriend fiancee fiancée "
    "stepmother stepdaughter granddaughter stepsister"
)
_MALE = (
    "dad father grandfather grandpa grandad brother husband son uncle nephew boyfriend fiance fiancé "
    "stepfather stepson grandson stepbrother"
)
_ANY = (
    "friend partner boss manager colleague coworker neighbour neighbor cousin kid child baby teenager "
    "toddler flatmate roommate housemate mentor teacher tutor coach doctor therapist client student"
)
_GENDER = {**dict.fromkeys(_FEMALE.split(), "f"), **dict.fromkeys(_MALE.split(), "m")}
_PEOPLE = "|".join(sorted({*_FEMALE.split(), *_MALE.split(), *_ANY.split()}, key=len, reverse=True))
# "my (little) sister (Aiko)", "our youngest daughter": a person of the speaker's, and their name.
_PERSON = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+(?:[a-z-]+\s+){{0,2}}?(?P<who>{_PEOPLE})\b(?:,?\s+(?P<name>[A-Z][a-z]+)\b)?"
)
_HER_OBJECT = re.compile(
    r"^\s*(?:[,.;:!?]|$|(?:to|at|in|on|for|with|from|into|out|up|back|home|there|over|around|and|or|a|an|the|"
    r"some|this|that|every|again|too|along|off|down|once|twice|about|before|after|when|because|so|yesterday|"
    r"today|tonight|tomorrow|last|next|now|often|later|soon|recently|all|how|what|why|if|whether)\b)",
    re.IGNORECASE,
)
_PRONOUN = re.compile(r"\b(?P<p>her|him|his)\b", re.IGNORECASE)

_CALENDAR = frozenset(w.lower() for w in (*MONTH_NAMES, *WEEKDAY_NAMES))
_PLACE = re.compile(
    r"\b(?:in|to|near|outside|around|from|visit|visited|visiting)\s+"
    r"(?P<place>[A-Z][\w'-]+(?:\s+(?:[A-Z][\w'-]+|de|del|la|upon)\b)*)"
)
# "there" as a place, not "there is", "there's been".
_THERE = re.compile(
    r"\b(?P<particle>(?:out|over|back|up|down)\s+)?there\b(?!\s*(?:'s|'re|is|are|was|were|will|would|has|have|"
    r"had|used|seems?|might|may|must|could|should|can|isn't|aren't|wasn't|weren't|be)\b)",
    re.IGNORECASE,
)
_MOTION = word_set(
    "go goes going went gone fly flies flying flew travel travels travelling traveling travelled traveled "
    "move moves moving moved drive drives driving drove head heads heading headed return returns returning "
    "returned get getting got come comes coming came take taking took bring bringing brought walk walking "
    "ride riding rode commute commuting relocate relocating relocated"
)


def _person(pronoun: str, earlier: Iterable[str]) -> str | None:
    wanted = "f" if pronoun == "her" else "m"
    for text in earlier:
        found = [m for m in _PERSON.finditer(text) if _GENDER.get(m.group("who").lower(), wanted) == wanted]
        if found:
            m = found[-1]
            return f"my {m.group('who')}" + (f" {m.group('name')}" if m.group("name") else "")
    return None


def _places(text: str) -> list[str]:
    found = (m.group("place") for m in _PLACE.finditer(text))
    return [p for p in found if p.lower() not in _CALENDAR and p not in ("I", "I'm")]


def _place(earlier: Iterable[str]) -> str | None:
    for text in earlier:
        if found := _places(text):
            return found[-1]
    return None


def resolve_references(clause: str, earlier: list[str]) -> str:
    """``clause`` with "her"/"him"/"his" and "there" as the person and place named ``earlier``
    (newest first), in the speaker's own words ("take my sister Aiko to Nara")."""
    out = clause

    def person(m: re.Match[str]) -> str:
        pronoun = m.group("p").lower()
        possessive = pronoun == "his" or (pronoun == "her" and not _HER_OBJECT.match(out[m.end() :]))
        if _PERSON.search(out[: m.start()]) or re.search(r"(?<=\s)[A-Z][a-z]+\b", out[: m.start()]):
            return m.group(0)  # the clause names whom it means
        who = _person("her" if pronoun == "her" else "him", earlier)
        if who is None:
            return m.group(0)
        return who + "'s" if possessive else who

    out = _PRONOUN.sub(person, out)
    if _THERE.search(out) and not _places(out):
        place = _place(earlier)
        if place is not None:

            def there(m: re.Match[str]) -> str:
                before = out[: m.start()].lower().split()[-4:]
                moving = bool(m.group("particle")) or any(w in _MOTION for w in before)
                particle = m.group("particle") or ""
                return f"{particle}{'to' if moving else 'in'} {place}"

            out = _THERE.sub(there, out)
    return out
