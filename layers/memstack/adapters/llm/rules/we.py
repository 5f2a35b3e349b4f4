"""Who "we" is, read from what the speaker said around it.

"We" in "My husband and I are renovating a farmhouse. We bought it in 2023." is the
couple; in "Our team moved to GitHub Actions. We still keep one Jenkins box." it is
the speaker's team; "we" beside "our kids" or "at home" is their household. The
newest mention decides (this clause first, then the speaker's earlier sentences and
turns). With nothing to go by, the caller's default holds: in a chat between two
people the speaker's family, said to an assistant "and others" (claiming no family).

Each answer is a template: ``{S}`` is where the subject's name goes ("Maya", "The user" opening a
sentence), ``{M}`` where it goes inside one ("Maya", "the user").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memstack.adapters.llm.rules.refs import KIN_WORDS

_PERSON = (
    r"wife|husband|partner|girlfriend|boyfriend|fiancée?|spouse|kids|children|son|daughter|parents|mum|mom|"
    r"dad|mother|father|brother|sister|friend|friends|flatmate|roommate|housemate|colleague|cofounder|"
    r"co-founder|boss|manager|team|family|cousin|grandparents|neighbou?r"
)
# "my husband and I", "me and my sister", "my best friend and I".
_PAIR = re.compile(
    rf"\b(?:[Mm]y\s+(?P<a>(?:[\w-]+\s+){{0,2}}?(?:{_PERSON}))(?:\s+[A-Z][\w-]+)?\s+and\s+I\b"
    rf"|\b[Mm]e\s+and\s+my\s+(?P<b>(?:[\w-]+\s+){{0,2}}?(?:{_PERSON}))\b)"
)
_WORK = re.compile(
    r"\b(?:at work|at the office|(?:my|our|the)\s+(?:\w+\s+)?(?:team|squad|company|startup|employer|org|"
    r"organi[sz]ation|department|codebase|repo|repository|monorepo|stack|service|app|product|platform|"
    r"backend|frontend|API|cluster|infrastructure|infra|pipeline|CI|customer|client|engineer|sprint|"
    r"release|database|DB|deployment|test suite|test coverage|workspace|microservice|schema)s?|"
    r"in production|in prod|to prod|on staging|on call|colleagues|coworkers|co-workers)\b",
    re.IGNORECASE,
)
_HOME = re.compile(
    r"\b(?:at home|(?:my|our)\s+(?:wife|husband|partner|kids|children|son|daughter|baby|family|house|home|"
    r"flat|apartment|garden|dog|cat|wedding|honeymoon|neighbou?rhood))\b",
    re.IGNORECASE,
)

TEAM = "{S}'s team"
FAMILY = "{S} and family"
OTHERS = "{S} and others"
#: what a household does ("we moved"), said to an assistant with no one named: a household, no family claimed
HOUSEHOLD = "{S}'s household"

# "my partner Kenji", "my wife": who "we" at home is, when the speaker named them.
_PARTNER = re.compile(
    r"\b[Mm]y\s+(?P<who>wife|husband|partner|girlfriend|boyfriend|fiancée?|fiance|spouse)\b"
    r"(?:,?\s+(?P<name>[A-Z][a-z]+)\b)?"
)


# What a household does together: "we moved to Osaka" is not the team, whatever was said at work before.
_HOME_LIFE = re.compile(
    r"\b(?:liv\w*|lives?|moved?|moving|relocat\w*|house|flat|apartment|holiday|vacation|trip|hik\w*|walk\w*|"
    r"dinner|cook\w*|wedding|married|honeymoon|weekend|kids|children|garden|dog|cat|pets?|adopt\w*|"
    r"fly|flying|flew|flights?|airport|travel\w*|visit\w*)\b",
    re.IGNORECASE,
)


# "We want to take my brother Kaito up Mount Rokko": what "we" do with the speaker's family or friends
# is the household's, not the team's.
_KIN = re.compile(
    r"\b(?:[Mm]y|[Oo]ur)\s+(?:[\w-]+\s+){0,2}?(?:"
    + "|".join(sorted(KIN_WORDS, key=len, reverse=True))
    + r")(?:-in-law)?s?\b"
)


def _partner(text: str) -> str | None:
    if m := _PARTNER.search(text):
        return "{S} and " + m.group("name") if m.group("name") else "{S} and {M}'s " + m.group("who")
    return None


def _said_in(text: str) -> str | None:
    if m := _PAIR.search(text):
        who = (m.group("a") or m.group("b")).lower()
        return FAMILY if who == "family" else TEAM if who == "team" else "{S} and {M}'s " + who
    if _WORK.search(text):
        return TEAM
    if _HOME.search(text):
        return FAMILY
    return None


def we_from(
    clause: str, earlier: Iterable[str], known: Iterable[str] = (), *, to_assistant: bool = False
) -> str | None:
    """Who "we" is in ``clause``: what the clause says, else the newest of the ``earlier`` texts
    (newest first) that says (not the team for what a household does): a template, or None.

    What a household does ("we moved", "we fly out in February") is, when nothing nearer says,
    the speaker and the partner they named before (``known``: what the speaker said of themselves,
    in their first person, longer ago); said ``to_assistant`` with no one named, their household."""
    if found := _said_in(clause):
        return found
    at_home = bool(_HOME_LIFE.search(clause) or _KIN.search(clause))
    for text in earlier:
        if at_home and (partner := _partner(text)):
            return partner
        found = _said_in(text)
        if found == TEAM and at_home:
            continue
        if found:
            return found
    if at_home:
        for text in known:
            if found := _partner(text):
                return found
        if to_assistant:
            return HOUSEHOLD
    return None
