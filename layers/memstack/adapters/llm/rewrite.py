"""First person to third person: "I live with my partner" -> "Maya lives with their partner".

A memory is read later, out of its conversation, by an agent that is not the
speaker, so it names who it is about. Verbs after "I" are conjugated with
English's regular rules plus the common irregular pasts (left unchanged).
"""

from __future__ import annotations

import re
from collections.abc import Callable


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


MODALS = _words(
    "can can't cannot could couldn't didn't hadn't haven't may might must need shall should shouldn't "
    "wasn't weren't will won't would wouldn't"
)
# Past forms that do not end in -ed (and present forms identical to the past).
IRREGULAR_PAST = _words(
    "ate became began bought broke brought built burnt came caught chose cost cut did drank dreamt "
    "drove fell felt flew forgot found gave got had heard held hit hurt kept knew learnt led left let "
    "lost made meant met paid put quit ran read rode said sang sat saw sent set shut slept sold spent "
    "spoke stood swam taught thought threw told took understood was went were woke won wore wrote"
)
ADVERBS = _words(
    "actually already also always currently even finally just mostly never now often only rarely "
    "really recently sometimes still usually"
)
FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'll|us|our|ours)\b", re.I
)


def conjugate(verb: str) -> str:
    """The third-person singular present of ``verb`` (pasts and modals unchanged)."""
    low = verb.lower()
    if low in MODALS or low in IRREGULAR_PAST or low.endswith("ed") or not low.isalpha():
        return verb
    special = {
        "have": "has",
        "do": "does",
        "go": "goes",
        "be": "is",
        "am": "is",
        "wanna": "wants to",
        "gonna": "is going to",
        "gotta": "has to",
    }
    if low in special:
        return special[low]
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def subject_name(speaker: str | None) -> str:
    """Who first-person text is about: the speaker's name, else "The user"."""
    if speaker and speaker.strip().lower() not in ("user", "me", "i", "human"):
        return speaker.strip()
    return "The user"


def is_first_person(text: str) -> bool:
    return bool(FIRST_PERSON.search(text.replace("’", "'")))


def to_third_person(text: str, subject: str, listener: str | None = None) -> str:
    """Rewrite first-person pronouns (and "you", when the ``listener`` is known) for ``subject``."""
    text = text.replace("’", "'")
    if listener:
        for you_form, named in (
            (r"\byou(?:'re| are)\b", f"{listener} is"),
            (r"\byou(?:'ve| have)\b", f"{listener} has"),
            (r"\byour(?:self)?\b", f"{listener}'s"),
            (r"\byours\b", f"{listener}'s"),
            (r"\byou\b", listener),
        ):
            text = re.sub(you_form, named, text, flags=re.IGNORECASE)
    mid = subject if subject != "The user" else "the user"
    group = f"{subject} and family"

    def name(m: re.Match[str]) -> str:
        # Sentence-initial "The user", elsewhere "the user"; a proper name stays as is.
        return subject if m.start() == 0 else mid

    def possessive(m: re.Match[str]) -> str:
        before = text[: m.start()]
        if re.search(rf"\b{re.escape(mid)}\b|\b{re.escape(subject)}\b", before, re.I):
            return "their" if m.group(0)[0].islower() else "Their"
        return name(m) + "'s"

    rules: list[tuple[str, Callable[[re.Match[str]], str]]] = [
        (r"\bI(?:'m| am)\b", lambda m: name(m) + " is"),
        (r"\bI(?:'ve| have)\b", lambda m: name(m) + " has"),
        (r"\bI'd\b", lambda m: name(m) + " would"),
        (r"\bI'll\b", lambda m: name(m) + " will"),
        (r"\bI (?:don't|do not)\b", lambda m: name(m) + " doesn't"),
        (r"\bwe(?:'re| are)\b", lambda m: (group if m.start() == 0 else f"{mid} and family") + " are"),
        (r"\bwe've\b", lambda m: (group if m.start() == 0 else f"{mid} and family") + " have"),
        (r"\bwe'll\b", lambda m: (group if m.start() == 0 else f"{mid} and family") + " will"),
        (r"\bwe\b", lambda m: group if m.start() == 0 else f"{mid} and family"),
        (r"\bus\b", lambda m: f"{mid} and family"),
        (r"\bmyself\b", lambda m: mid),
        (r"\b(?:mine|ours)\b", lambda m: f"{mid}'s"),
        (r"\bme\b", lambda m: mid),
    ]
    for pattern, repl in rules:
        text = re.sub(pattern, repl, text, flags=re.IGNORECASE)
    # "I" + optional adverbs + verb: conjugate the verb.
    adverbs = "|".join(sorted(ADVERBS))

    def verb(m: re.Match[str]) -> str:
        return f"{name(m)}{m.group('adv') or ''} {conjugate(m.group('verb'))}"

    text = re.sub(rf"\bI(?P<adv>(?:\s+(?:{adverbs}|\w+ly))*)\s+(?P<verb>[\w']+)", verb, text)
    text = re.sub(r"\bI\b", lambda m: name(m), text)
    # Possessives last: "their" needs the subject already written before it.
    for word in ("my", "our"):
        text = re.sub(rf"\b{word}\b", possessive, text, flags=re.IGNORECASE)
    return text
