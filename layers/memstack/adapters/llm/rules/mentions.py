""" "She", "he", "they" and "her name" that open a sentence, read as who the speaker named before.

``rewrite.resolve_pronoun`` looks at the sentence just before; people are often named two
sentences or a turn earlier ("My cousin Leila got into med school. The whole family is thrilled.
She starts at Edinburgh in September.", "Me and Sam split up." ... "He kept the flat"). The
speaker's own words before it (this message's earlier sentences, then their last turns, newest
first) are searched for the last person of the pronoun's gender (``refs.person``), or, for
"they", the company or group just named ("I interviewed with Klarna. They offered me ...").
Only an opening pronoun is resolved: it is the subject the memory is about, and a sentence
that keeps it says nothing when read alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memstack.adapters.llm.rules import grammar, refs
from memstack.adapters.llm.rules.rewrite import is_first_person

_OPENING = re.compile(
    r"^(?P<pronoun>he|she|they|her|his)(?P<contraction>'s|'ll|'d|'re|'ve)?(?=\s)", re.IGNORECASE
)
# "her name is Biscuit": whose, not who; "her" opening a sentence is nearly always whose.
_POSSESSIVE = frozenset(("her", "his"))
# A company or group "they" can be: named after the words that name who one works with or for.
_ORGANISATION = re.compile(
    r"\b(?:interview(?:ed|ing)? (?:with|at|for)|interview (?:with|at)|appl(?:y|ied|ying) (?:to|at|for)|"
    r"join(?:ed|ing)?|work(?:s|ed|ing)? (?:at|for)|hired by|rejected by|offer from)\s+"
    r"(?P<org>[A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,2})"
)
_CONTRACTIONS = {"'s": " is", "'ll": " will", "'d": " would", "'re": " are", "'ve": " have"}
# "They're" or "they've" of a company reads as "is" / "has" after its name.
_SINGULAR = {" are": " is", " have": " has"}
# How many of the speaker's earlier sentences a company named for "they" may be in.
_THEY_REACH = 1


def resolve_opening(
    sentence: str, earlier: Iterable[str], speakers: Iterable[str] = (), *, people_only: bool = False
) -> str:
    """``sentence`` with an opening "she"/"he"/"her"/"his" as the last person of that gender the
    speaker named ``earlier`` (newest first), and "they" as the company just named (not with
    ``people_only``); else as it is."""
    m = _OPENING.match(sentence)
    if m is None:
        return sentence
    pronoun = m.group("pronoun").lower()
    rest = sentence[m.end() :]
    earlier = list(earlier)
    if pronoun == "they":
        if people_only:
            return sentence
        who = _organisation(earlier[:_THEY_REACH])
        contraction = _CONTRACTIONS.get((m.group("contraction") or "").lower(), m.group("contraction") or "")
        if who is None or (contraction == "" and not rest.lstrip()[:1].islower()):
            return sentence
        return who + _SINGULAR.get(contraction, contraction) + _singular_verb(rest)
    gender = "her" if pronoun in ("she", "her") else "him"
    who = refs.person(gender, earlier, frozenset(speakers))
    if who is None:
        return sentence
    who = who[:1].upper() + who[1:]
    if pronoun in _POSSESSIVE and not m.group("contraction"):
        return who + "'s" + rest
    return who + _CONTRACTIONS.get((m.group("contraction") or "").lower(), "") + rest


def _organisation(earlier: list[str]) -> str | None:
    """The company or group "they" is: the last one named in the speaker's sentence before, when
    that sentence is the speaker's own ("I interviewed with Klarna")."""
    for text in earlier:
        if not is_first_person(text):
            return None
        found = [
            m.group("org") for m in _ORGANISATION.finditer(text) if m.group("org").split()[0] not in _NOT_ORG
        ]
        if found:
            return found[-1]
    return None


_NOT_ORG = frozenset(("I", "I'm", "The", "My", "Our", "Christmas", "Easter", "Home", "Work"))


def _singular_verb(rest: str) -> str:
    """ "They offer" -> "Klarna offers": a company named takes a singular present verb."""
    words = rest.split(" ")
    for i, word in enumerate(words):
        if not word:
            continue
        if grammar.is_base(word) and word.lower() not in grammar.MODALS:
            words[i] = grammar.third_person(word)
        break
    return " ".join(words)
