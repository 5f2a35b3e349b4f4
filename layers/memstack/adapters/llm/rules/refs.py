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

from memstack.adapters.llm.rules import grammar
from memstack.adapters.llm.rules.grammar import word_set
from memstack.domain.time.calendar_words import MONTH_NAMES, WEEKDAY_NAMES

_FEMALE = (
    "mum mom mother grandmother grandma gran nan sister wife daughter aunt niece girlfriend fiancee fiancée "
    "stepmother stepdaughter granddaughter stepsister landlady goddaughter godmother stepmum stepmom"
)
_MALE = (
    "dad father grandfather grandpa grandad brother husband son uncle nephew boyfriend fiance fiancé "
    "stepfather stepson grandson stepbrother landlord godson godfather stepdad"
)
_ANY = (
    "friend partner boss manager colleague coworker neighbour neighbor cousin kid child baby teenager "
    "toddler flatmate roommate housemate mentor teacher tutor coach doctor therapist client student "
    "buddy mate pal bestie classmate teammate sibling twin"
)
_GENDER = {**dict.fromkeys(_FEMALE.split(), "f"), **dict.fromkeys(_MALE.split(), "m")}
#: the speaker's family and friends ("my sister", "our kids"): what "we" do with them is the household's
KIN_WORDS = frozenset(
    (
        *_FEMALE.split(),
        *_MALE.split(),
        *("friend", "partner", "cousin", "kid", "kids", "child", "children", "baby", "sibling", "twin"),
    )
)
#: the words that name a person of the speaker's ("sister", "teacher"): never what "it" means
PERSON_WORDS = frozenset((*_FEMALE.split(), *_MALE.split(), *_ANY.split()))
_PEOPLE = "|".join(sorted({*_FEMALE.split(), *_MALE.split(), *_ANY.split()}, key=len, reverse=True))
# "my (little) sister (Aiko)", "our youngest daughter", "my mother-in-law": a person of the speaker's,
# and their name.
_PERSON = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+(?:[a-z-]+\s+){{0,2}}?(?P<who>(?:{_PEOPLE})(?:-in-law)?)(?![\w-])"
    r"(?:,?\s+(?P<name>[A-Z][a-z]+)\b)?"
)
# A bare name said of a person: "with Greta", "a friend called Noor", "Ana is coming", "Kofi and I".
# Only where a person is meant: not "learning Korean" or "at Spotify", which name no one.
_NAME = r"(?P<{}>[A-Z][a-z]+(?:-[A-Z][a-z]+)?)\b"
_BARE_NAME = re.compile(
    r"\b(?:with|called|named|met|meet|meeting|told|tell|asked|invited|texted|messaged|hugged|helped|phoned|"
    r"call|calling|dating|married|marry|(?<![\w'])(?:[Mm]e|I) and)\s+"
    + _NAME.format("object")
    + r"|(?:^|(?<=[.!?;,]\s))"
    + _NAME.format("subject")
    + r"(?=\s+(?:and (?:I|me|my)\b|(?:is|was|has|had|will|just|says|said|told|wants|loves|lives|got|turns|"
    r"turned|starts|started|came|comes|moved|used)\b)|['’]s\s)"
)
# Capitalised words that open a sentence and name no one ("How's your brother?", "There's a park").
_NOT_A_PERSON = frozenset(
    (
        *("I", "I'm", "I've", "I'll", "I'd", "The", "My", "Our", "We", "It", "This", "That"),
        *("How", "What", "Who", "Where", "When", "Why", "Which", "There", "Here", "Everyone", "Nobody"),
        *("Someone", "Everything", "Nothing", "Something", "Let", "Life"),
    )
)
# "We manage our infra with Terraform", "built it with React": "with" after a verb of making or running
# something names the tool it is done with, not a person it is done with.
_TOOL_VERBS = word_set(
    "manage build deploy run host write code test configure provision automate monitor develop implement "
    "migrate compile script generate train integrate parse handle render process store track orchestrate "
    "serve replace rewrite refactor package ship debug profile benchmark analyse analyze plot query "
    "schedule containerise containerize bundle lint format install wire"
)
_HER_OBJECT = re.compile(
    r"^\s*(?:[,.;:!?]|$|(?:to|at|in|on|for|with|from|into|out|up|back|home|there|over|around|and|or|a|an|the|"
    r"some|this|that|every|again|too|along|off|down|once|twice|about|before|after|when|because|so|yesterday|"
    r"today|tonight|tomorrow|last|next|now|often|later|soon|recently|all|how|what|why|if|whether|as)\b)",
    re.IGNORECASE,
)
_NAMES_ITS_OWN = re.compile(r"(?<=\s)[A-Z][a-z]+\b|\b(?i:he|she)\b")
# "take her hiking", "bring him shopping": whom, not whose.
_TAKE = re.compile(r"\b(?:take|takes|took|taking|bring|brings|brought|bringing)\s+$", re.IGNORECASE)
_GERUND = re.compile(r"^\s+[a-z]+ing\b")
_PRONOUN = re.compile(r"\b(?P<p>her|him|his)\b", re.IGNORECASE)

# "them": the speaker's people named before ("My parents are visiting. I'm taking them to Sintra."),
# when they are the last plural the speaker named ("My parents gave me two tickets. I'm using them"
# is the tickets, left as it is).
_PEOPLE_PLURAL = (
    "parents kids children grandparents in-laws twins friends neighbours neighbors cousins siblings brothers "
    "sisters sons daughters colleagues coworkers grandkids grandchildren nieces nephews flatmates roommates "
    "housemates students clients"
)
_PEOPLE_NAMED = re.compile(
    rf"\b(?:[Mm]y|[Oo]ur)\s+(?:[a-z-]+\s+){{0,2}}?(?P<who>{'|'.join(_PEOPLE_PLURAL.split())})\b"
)
_THEM = re.compile(r"\bthem\b", re.IGNORECASE)
_PLURAL = re.compile(r"\b[a-z][a-z-]*[^s]s\b")

_CALENDAR = frozenset(w.lower() for w in (*MONTH_NAMES, *WEEKDAY_NAMES))
# "at Lake Bled" too, where "there" keeps its "at" ("been at Lake Bled"); not "at Christmas".
_HOLIDAYS = word_set("christmas easter thanksgiving halloween diwali eid hanukkah passover new")
_PLACE = re.compile(
    r"\b(?P<preposition>in|to|near|outside|around|from|at|visit|visited|visiting)\s+"
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


def _gender(who: str) -> str | None:
    return _GENDER.get(who.lower().removesuffix("-in-law"))


def _person(pronoun: str, earlier: Iterable[str], exclude: frozenset[str]) -> str | None:
    """The person "her" or "him" is: in the newest text that names one, the last named with the
    pronoun's gender ("my brother Idris", not "my cousin Sara", for "him"), else the last named
    with none ("my friend", "Greta"); never a speaker of the chat (``exclude``)."""
    wanted = "f" if pronoun == "her" else "m"
    for text in earlier:
        words_of = [(m.start(), m.end(), _gender(m.group("who")), _named(m)) for m in _PERSON.finditer(text)]
        taken = [(start, end) for start, end, _, _ in words_of]
        names = [
            (m.start(group), m.end(group), None, m.group(group))
            for m in _BARE_NAME.finditer(text)
            for group in ("object", "subject")
            if m.group(group) and not any(a <= m.start(group) < b for a, b in taken) and not _tool(text, m)
        ]
        found = [c for c in words_of + names if c[3] not in exclude and c[3].split()[-1] not in _NOT_A_PERSON]
        same = [c for c in found if c[2] == wanted]
        either = same or [c for c in found if c[2] is None]
        if either:
            return max(either)[3]
    return None


def _tool(text: str, m: re.Match[str]) -> bool:
    """ "with Terraform" after a verb of making or running something in its clause: a tool."""
    if not m.group(0).lower().startswith("with"):
        return False
    before = re.split(r"[,.;!?]", text[: m.start()])[-1].split()[-5:]
    return any(grammar.lemma(w.lower()) in _TOOL_VERBS for w in before)


def person(pronoun: str, earlier: Iterable[str], exclude: frozenset[str]) -> str | None:
    """The person "her" / "him" (``pronoun``) is in ``earlier`` (newest first), see ``_person``."""
    return _person(pronoun, earlier, exclude)


def _named(m: re.Match[str]) -> str:
    return f"my {m.group('who')}" + (f" {m.group('name')}" if m.group("name") else "")


def _names_its_own(before: str, wanted: str) -> bool:
    """The clause before the pronoun names whom it may mean: a person word of its gender or of none
    ("my mum loves her garden"), a name, or "he"/"she"; not "my uncle" for "her"."""
    people = list(_PERSON.finditer(before))
    if _NAMES_ITS_OWN.search(_PERSON.sub(" ", before)):
        return True  # a name of its own, not the name of a person word ("my uncle Emre")
    return any(_gender(m.group("who")) in (wanted, None) for m in people)


# "at the local food bank", "near my office", "to a big park": a place said without a capital.
_COMMON_PLACE = re.compile(
    r"\b(?P<preposition>in|to|near|outside|around|from|at|into)\s+"
    r"(?P<place>(?P<det>the|a|an|my|our)\s+(?:[a-z][\w'-]*\s+){0,2}?(?P<head>[a-z][\w'-]*))"
    r"(?=\s*(?:[,.;:!?)]|$)|\s+(?:on|in|at|for|with|every|after|before|since|until|last|next|this|and|but|so|"
    r"near|by|where|which|that|when|because|to|from)\b)"
)
# Nouns after "in", "at" that name no place: a time ("in the morning"), a manner ("in a way").
_NOT_PLACES = word_set(
    "morning afternoon evening night day days week weekend month year moment end beginning start middle "
    "meantime past future time times way row sense case fact opinion life mood hurry loss least most "
    "while bit lot rest same first last long run minute hour second"
)


def _common_places(text: str) -> list[tuple[int, str, str]]:
    """Places said without a capital, as noun phrases the words tables know: "a X" read again as "the X"."""
    out = []
    for m in _COMMON_PLACE.finditer(text):
        head, words = m.group("head").lower(), m.group("place").split()
        if head in _NOT_PLACES or head in PERSON_WORDS or head.rstrip("s") in PERSON_WORDS:
            continue
        if not all(_modifier(w) for w in words[1:-1]):
            continue  # "to a friend" is a person, "at a glance" ... only nouns and adjectives
        if "NOUN" not in grammar.tags(head):
            continue
        det = "the" if m.group("det") in ("a", "an") else m.group("det")
        out.append((m.start(), m.group("preposition"), " ".join([det, *words[1:]])))
    return out


_TAGS_PLACE = frozenset({"NOUN", "ADJ"})


def _modifier(word: str) -> bool:
    """A word that may stand in a place's noun phrase: a noun or adjective, a gerund ("bouldering
    gym"), a possessive ("a friend's house")."""
    low = word.lower()
    return bool(_TAGS_PLACE & grammar.tags(low)) or low.endswith(("ing", "'s")) or not grammar.tags(low)


def _places(text: str) -> list[tuple[str, str]]:
    """The places ``text`` names, each with the preposition it came with ("at", "Lake Bled")."""
    return [(preposition, place) for _, preposition, place in _placed(text)]


def _placed(text: str) -> list[tuple[int, str, str]]:
    """The places ``text`` names in order, with where each starts and its preposition; a spot named
    beside a thing ("a bouldering gym near my office") is that thing there."""
    found = [(m.start(), m.group("preposition"), m.group("place")) for m in _PLACE.finditer(text)]
    found = [
        (start, preposition, p)
        for start, preposition, p in found
        if p.lower() not in _CALENDAR and p not in ("I", "I'm") and p.split()[0].lower() not in _HOLIDAYS
    ]
    taken = {start for start, _, _ in found}
    found += [c for c in _common_places(text) if c[0] not in taken]
    out = []
    for start, preposition, place in sorted(found):
        if preposition.lower() in _WITHIN and (thing := _THING_BEFORE.search(text[:start])):
            det = "the" if thing.group("det").lower() in ("a", "an") else thing.group("det").lower()
            if all(_modifier(w) for w in thing.group("words").split()) and "NOUN" in grammar.tags(
                thing.group("words").split()[-1].lower()
            ):
                start, preposition = thing.start(), "at"
                place = f"{det} {thing.group('words')} {_within(text, thing.end())}"
        out.append((start, preposition, place))
    return out


# A thing just before "near", "around", "outside": "a bouldering gym" of "a bouldering gym near my office".
_THING_BEFORE = re.compile(
    r"\b(?P<det>[Aa]n?|[Tt]he|[Mm]y|[Oo]ur)\s+(?P<words>(?:[a-z][\w'-]*\s+){0,2}[a-z][\w'-]*)\s+$"
)


def _within(text: str, at: int) -> str:
    """ "near my office" as said after the thing at ``at``, up to the end of its phrase."""
    rest = text[at:].lstrip()
    m = re.match(
        r"(?:near|around|outside)\s+(?:[A-Za-z][\w'-]*)(?:\s+[A-Za-z][\w'-]*){0,3}?(?=\s*(?:[,.;:!?]|$)|\s+(?:on|in|at|for|with|every|and|but|so|where|which|that|when)\b)",
        rest,
    )
    return m.group(0) if m else rest.split(",")[0].strip()


# Words that place somewhere within or beside a place already named ("mostly around Niseko").
_WITHIN = word_set("around near outside")


def _heads(texts: list[str]) -> set[str]:
    """The nouns said as places ("park" of "near Nakanoshima park", "to a big park"): "the park" said
    again is that place."""
    out: set[str] = set()
    for text in texts:
        for _, _, place in _placed(text):
            last = place.split()[-1]
            if last[:1].islower():
                out.add(last.lower())
        for m in _PLACE.finditer(text):
            after = text[m.end() :].split(maxsplit=1)
            word = after[0].strip(",.;:!?") if after else ""
            if word[:1].islower() and "NOUN" in grammar.tags(word) and word not in _NOT_PLACES:
                out.add(word)
    return out


def _place(earlier: Iterable[str]) -> tuple[str, str] | None:
    """The last place named in the newest text that names one (a noun said as a place before, "the
    park", too); a spot named within or beside it ("in Hokkaido, mostly around Niseko") only when no
    other is."""
    texts = list(earlier)
    heads = _heads(texts)
    for text in texts:
        found = _placed(text)
        spans = [(start, start + len(place) + len(preposition) + 1) for start, preposition, place in found]
        for m in re.finditer(r"\bthe\s+(?P<head>[a-z][\w'-]*)\b", text):
            if m.group("head") in heads and not any(a <= m.start() < b for a, b in spans):
                found.append((m.start(), "in", m.group(0)))
        if found:
            found.sort()
            main = [(p, place) for _, p, place in found if p.lower() not in _WITHIN]
            return (main or [(p, place) for _, p, place in found])[-1]
    return None


def _people(earlier: Iterable[str]) -> str | None:
    """The speaker's people "them" is: in the newest text with a plural noun, its last one, when
    that is "my parents", "our kids", ... (else None: "them" is a thing)."""
    for text in earlier:
        people = {m.start("who"): m.group(0) for m in _PEOPLE_NAMED.finditer(text)}
        plurals = [m.start() for m in _PLURAL.finditer(text) if "NOUN" in grammar.tags(m.group(0))]
        if not plurals and not people:
            continue
        last = max([*plurals, *people])
        return people[last][:1].lower() + people[last][1:] if last in people else None
    return None


def people(earlier: Iterable[str]) -> str | None:
    """The speaker's people "they" / "them" is in ``earlier`` (newest first): "my parents", "our kids"
    when they are the last plural named, else None."""
    return _people(earlier)


def resolve_references(clause: str, earlier: list[str], speakers: Iterable[str] = ()) -> str:
    """``clause`` with "her"/"him"/"his" and "there" as the person and place named ``earlier``
    (newest first), in the speaker's own words ("take my sister Aiko to Nara"); ``speakers``:
    the names of the people in the chat, whom "her" and "him" are not."""
    exclude = frozenset(speakers)
    out = clause

    def person(m: re.Match[str]) -> str:
        pronoun = m.group("p").lower()
        after = out[m.end() :]
        adverb = (w := after.split()[:1]) and grammar.is_adverb(w[0].strip(",.;!?"))  # "checks on her daily"
        possessive = pronoun == "his" or (pronoun == "her" and not _HER_OBJECT.match(after) and not adverb)
        if possessive and _TAKE.search(out[: m.start()]) and _GERUND.match(out[m.end() :]):
            possessive = False
        if _names_its_own(out[: m.start()], "f" if pronoun == "her" else "m"):
            return m.group(0)  # the clause names whom it means ("my mum loves her garden", "he hid his bone")
        who = _person("her" if pronoun == "her" else "him", earlier, exclude)
        if who is None:
            return m.group(0)
        return who + "'s" if possessive else who

    out = _PRONOUN.sub(person, out)
    if (them := _THEM.search(out)) and not _PEOPLE_NAMED.search(out[: them.start()]):
        people = _people(earlier)
        if people is not None:
            out = _THEM.sub(people, out)
    if _THERE.search(out) and not _places(out):
        found = _place(earlier)
        if found is not None:
            preposition, place = found

            def there(m: re.Match[str]) -> str:
                before = out[: m.start()].lower().split()[-4:]
                moving = bool(m.group("particle")) or any(w in _MOTION for w in before)
                particle = m.group("particle") or ""
                return f"{particle}{'to' if moving else 'at' if preposition == 'at' else 'in'} {place}"

            out = _THERE.sub(there, out)
    return out
