"""Single-valued attributes of the user, found in third-person memory text.

"Maya lives in Tokyo" and "Maya and family moved to Osaka" both speak of the
attribute ``residence``; a new value for the same attribute of the same
subject is an UPDATE. Patterns run on text already rewritten to the third
person, so the same code reads new statements and stored memories.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import lemminflect

from memstack.adapters.llm.rules import grammar
from memstack.adapters.llm.rules.grammar import alternation

# A place: a name ("Osaka", "Stratford upon Avon"), or a noun phrase that ends in one
# ("a small town outside Lyon", "the suburbs of Porto"): the whole phrase is the value.
_NAME = r"[A-Z][\w'-]*(?:\s+(?:[A-Z][\w'-]*|de|del|la|upon|on))*"
_PLACE = (
    r"(?P<v>(?:(?:a|an|the)\s+(?:[a-z][\w'-]*\s+){0,3}?(?:in|outside|near|of|by|north of|south of|"
    r"east of|west of)\s+)?" + _NAME + ")"
)
# An organisation: a name ("KPMG", "St Mary's") or a common noun phrase ("the city council", "a bank").
_ORG = (
    r"(?P<v>[A-Z][\w'&-]*(?:\s+[A-Z][\w'&-]*)*"
    r"|(?:the|a|an)\s+(?:[a-z][\w'-]*\s+){0,2}?[a-z][\w'-]*(?=\s+(?:in|on|as|at|for|with|and|since|near|downtown)\b|[,.;!]|$))"
)
_JOBS = (
    r"engineer|developer|programmer|nurse|teacher|doctor|manager|designer|scientist|analyst|lawyer|writer|"
    r"student|consultant|accountant|chef|cook|architect|researcher|professor|pharmacist|electrician|"
    r"journalist|photographer|artist|musician|librarian|dentist|firefighter|police officer|intern|founder|"
    r"director|administrator|technician|therapist|mechanic|pilot|salesperson|baker|farmer|paramedic|"
    r"auditor|barista|instructor|plumber|carpenter|vet|veterinarian|surgeon|editor|translator|tutor|"
    r"lecturer|officer|clerk|cashier|waiter|waitress|bartender|driver|courier|receptionist|secretary|"
    r"assistant|coordinator|specialist|strategist|marketer|recruiter|banker|trader|economist|"
    r"psychologist|counsellor|counselor|social worker|midwife|caregiver|carer|coach|trainer|cleaner|"
    r"builder|welder|miner|soldier|lead|head|supervisor|owner|ceo|cto|freelancer|contractor|retiree"
)
# Up to three modifiers ("senior data engineer"), never across a preposition.
_MODIFIER = r"(?:(?!(?:at|in|for|and|with|the|a|an|of|on|there|to)\b)(?:[a-z-]+|[A-Z]{2,})\s+)"
_JOB = r"(?P<v>" + _MODIFIER + r"{0,3}(?:" + _JOBS + r"))\b"
# A title nobody listed ("a software tester at a games studio"): an agent noun, read as a job only
# where an employer follows it (see _agent_noun).
_AGENT_JOB = r"(?P<v>" + _MODIFIER + r"{0,3}[a-z]+(?:er|or|ist|ian|eer))\s+(?:at|for|with)\s+"
# A title after "as" / "to": up to four words, acronyms included ("QA lead", "head of design").
_TITLE = r"(?P<v>(?:[a-z]|[A-Z]{2,})[\w -]*?)(?=\s+(?:at|for|in|on|with)\b|[,.;!]|$)"
_ADV = r"(?:\s+(?:now|currently|still|just|recently|finally|officially|already|\w+ly))*"
# "Tom and family packed everything up and now live in York": a verb coordinated with the subject.
_AND = r"(?:\s+[^,.;]*?\band)?"


def _state(lemmas: str) -> str:
    """The verb groups that state a present state: "lives", "is now living", "has lived",
    "has been living" (not "lived" or "used to live": those are history)."""
    present, ing, done = (alternation(lemmas, *tags) for tags in (("VBZ", "VBP"), ("VBG",), ("VBN",)))
    return rf"(?P<verb>(?:is|are){_ADV}\s+{ing}|(?:has|have){_ADV}\s+(?:been{_ADV}\s+{ing}|{done})|{present})"


_NUMBER = r"(?P<v>\d+|one|two|three|four|five|six|seven|eight|nine|ten)"


def _is_verb(word: str) -> bool:
    return "VERB" in lemminflect.getAllLemmas(word)


def _agent_noun(value: str) -> bool:
    """ "tester", "designer", "violinist", "librarian": a noun for someone who does something
    ("test" + er); not "father" or "member", which name no verb."""
    head = value.split()[-1].lower()
    if "NOUN" not in lemminflect.getAllLemmas(head):
        return False
    if head.endswith(("ist", "ian", "eer")):
        return True
    # The agent noun may end a compound: "bookkeeper" is "book" + "keeper" ("keep" + er).
    for start in range(0, max(1, len(head) - 5)):
        tail = head[start:]
        for stem in (tail[:-2], tail[:-1], tail[:-3] if tail[-3:-2] == tail[-4:-3] else ""):
            if len(stem) >= 3 and _is_verb(stem):
                return True
    return False


@dataclass(frozen=True)
class AttributeValue:
    name: str
    value: str
    #: a stative form ("lives in X", "works as X"): a new value can be substituted in place
    stative: bool
    span: tuple[int, int]
    #: where the verb group is ("has been living"), for the patterns that read one
    verb: tuple[int, int] | None = None


@dataclass(frozen=True)
class _Pattern:
    name: str
    regex: str  # ``{S}`` is the subject alternation
    stative: bool
    flags: int = 0
    #: a check on the value the regex alone cannot make
    valid: Callable[[str], bool] = lambda _v: True


_PATTERNS = (
    _Pattern(
        "residence",
        r"{S}" + _AND + _ADV + r"\s+" + _state("live, reside") + r"\s+in\s+" + _PLACE,
        True,
    ),
    _Pattern("residence", r"{S}" + _ADV + r"\s+(?:is|are)\s+based\s+in\s+" + _PLACE, True),
    _Pattern(
        "residence",
        r"{S}"
        + _ADV
        + r"\s+(?:rents|rent|owns|own)\s+an?\s+(?:\w+\s+)?(?:flat|apartment|house|room|place)\s+in\s+"
        + _PLACE,
        True,
    ),
    _Pattern("residence", r"\b[Hh]ome for {S} is\b[^,.;]{0,40}?\bin\s+" + _PLACE, True),
    _Pattern(
        "residence",
        r"{S}"
        + _AND
        + _ADV
        + r"\s+(?:has |have )?(?:just |finally )?(?:moved|relocated|made the (?:big )?move)"
        + r"(?:\s+\w+)?\s+to\s+"
        + _PLACE,
        False,
    ),
    _Pattern("birthplace", r"{S}" + _ADV + r"\s+(?:was|were)\s+born\s+in\s+" + _PLACE, True),
    _Pattern("employer", r"{S}" + _ADV + r"\s+" + _state("work") + r"\s+(?:at|for)\s+" + _ORG, True),
    _Pattern(
        "employer",
        r"{S}" + _ADV + r"\s+(?:has\s+)?(?:joined|started (?:work(?:ing)? )?(?:at|with|for)|"
        r"got an?\s+(?:new\s+)?job\s+(?:at|with)|(?:is|are)\s+joining)\s+" + _ORG,
        False,
    ),
    _Pattern(
        "job_title",
        r"{S}" + _ADV + r"\s+" + _state("work") + r"\s+as\s+(?:an?\s+)?" + _TITLE,
        True,
    ),
    _Pattern("job_title", r"{S}" + _ADV + r"\s+is\s+(?:an?\s+|the\s+)?" + _JOB, True),
    _Pattern("job_title", r"{S}" + _ADV + r"\s+is\s+(?:an?\s+|the\s+)" + _AGENT_JOB, True, valid=_agent_noun),
    _Pattern(
        "job_title", r"{S}" + _ADV + r"\s+(?:became|has become|is now)\s+(?:an?\s+|the\s+)?" + _JOB, False
    ),
    _Pattern("job_title", r"\bmade {S}\s+(?:an?\s+|the\s+|their\s+)?" + _JOB, False),
    _Pattern(
        "job_title",
        r"{S}"
        + _ADV
        + r"\s+(?:has\s+)?(?:started|began|begun|starts)(?:\s+out|\s+off)?"
        + r"\s+(?:work(?:ing)?\s+)?as\s+(?:an?\s+)?"
        + _TITLE,
        False,
    ),
    _Pattern(
        "job_title",
        r"{S}"
        + _ADV
        + r"\s+(?:got\s+|was\s+|has been\s+|have been\s+)?(?:promoted|bumped up|moved up|stepped up)"
        r"\s+to\s+(?:an?\s+)?" + _TITLE,
        False,
    ),
    # "joined Tessera as a support engineer", "runs the kitchen as head chef": a role, said in passing.
    _Pattern(
        "job_title",
        r"{S}" + _ADV + r"\s+(?:has\s+)?joined\s+[^,.;]{1,40}?\s+as\s+(?:an?\s+)?" + _TITLE,
        False,
    ),
    _Pattern(
        "job_title", r"{S}" + _ADV + r"\s+[a-z]+s\s+[^,.;]{1,40}?\bas\s+(?:an?\s+|the\s+)?" + _JOB, False
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
        "name_of",
        r"{S}'s\s+(?P<k>[a-z]+(?:'s)?(?:\s+[a-z]+)?)\s+(?:is called|is named|name is|'s name is)\s+"
        r"(?P<v>[A-Z][\w-]*)",
        True,
    ),
    _Pattern(
        "count",
        r"{S}" + _ADV + r"\s+(?:has|have)\s+" + _NUMBER + r"\s+(?P<k>kids|children|sons|daughters|brothers|"
        r"sisters|siblings|cats|dogs|pets|grandchildren)\b",
        True,
    ),
    _Pattern(
        "favourite",
        r"{S}'s\s+(?:all-time\s+)?favou?rite\s+(?P<k>\w+(?:\s+\w+)?)\s+is\s+(?P<v>[^,.;!]+?)"
        r"(?=\s+(?:now|these days|nowadays)\b|[,.;!]|$)",
        True,
    ),
    _Pattern(
        "favourite",
        r"(?P<v>\b[A-Z][\w' -]*?)\s+is\s+{S}'s\s+(?:new\s+)?(?:all-time\s+)?favou?rite\s+"
        r"(?P<k>\w+(?:\s+(?!now\b|these\b|nowadays\b)\w+)?)\b",
        True,
    ),
    _Pattern(
        "prefer",
        r"{S}" + _ADV + r"\s+prefers?\s+(?P<v>[\w' -]+?)\s+(?:over|to|rather than)\s+(?P<k>[\w' -]+?)"
        r"(?=\s+(?:now|these days|nowadays)\b|[,.;!]|$)",
        False,
    ),
)


def _subject(subject: str) -> str:
    """The subject as ``rules.we`` writes "we": "Maya and family", "Maya and Kenji", "Maya and
    Maya's partner", "Maya's household" (``to_third_person`` writes the rest)."""
    names = "|".join(sorted({re.escape(subject), "[Tt]he user"}))
    others = rf"family|others|[A-Z][a-z]+\b(?!')|(?:{names})'s\s+[a-z]+"
    return rf"\b(?:{names})(?:\s+and\s+(?:{others})|'s\s+household)?"


def find_attributes(text: str, subject: str) -> list[AttributeValue]:
    """Every attribute of ``subject`` stated in ``text`` (first match per attribute)."""
    found: dict[str, AttributeValue] = {}
    subj = _subject(subject)
    for pattern in _PATTERNS:
        for m in re.finditer(pattern.regex.replace("{S}", subj), text, pattern.flags):
            name = pattern.name
            if pattern.name == "prefer":
                # "prefers tea over coffee" and "prefers coffee over tea" choose within the same pair.
                pair = sorted(x.strip().lower() for x in (m.group("v"), m.group("k")))
                name = "prefer:" + "|".join(pair)
            elif "k" in m.groupdict() and m.group("k"):
                key = m.group("k").lower().replace("'s", "")
                name = f"{pattern.name}:{key}"
            if name in found or not pattern.valid(m.group("v")):
                continue
            value = m.group("v").strip()
            verb = m.span("verb") if m.groupdict().get("verb") else None
            found[name] = AttributeValue(name, value, pattern.stative, m.span("v"), verb)
    return list(found.values())


def same_value(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


def present(verb_group: str) -> str:
    """ "has been living" -> "lives", "have lived" -> "live": the state as it holds now."""
    parts = verb_group.split()
    main = grammar.lemma(parts[-1])
    plural = parts[0].lower() in ("are", "have") or parts[0].lower() == main
    return main if plural else grammar.third_person(main)
