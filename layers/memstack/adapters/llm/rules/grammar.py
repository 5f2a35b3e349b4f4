"""English verb forms for the third-person rewrite, from lemminflect's tables (no model, no network).

Why lemminflect: measured on 72 first-person verbs (``tests/extraction/test_grammar.py``
keeps the hard ones), it conjugated 71 correctly against 68 for the hand-written
suffix rules, and, more important, it knows which words are verbs at all, so
"I no longer drink it" no longer becomes "the user noes longer drink it", and
"I fly drones" no longer reads "fly" as an adverb. ``inflect`` has no
third-person-singular form; ``pyinflect`` is lemminflect's unmaintained
predecessor.
"""

from __future__ import annotations

import re
from functools import lru_cache

import lemminflect


def word_set(text: str) -> frozenset[str]:
    """A set of words written as one space-separated string."""
    return frozenset(text.split())


MODALS = word_set(
    "can can't cannot could couldn't didn't hadn't haven't may might must shall should "
    "shouldn't wasn't weren't will won't would wouldn't"
)
# Colloquial forms lemminflect has no entry for.
_SPECIAL = {"wanna": "wants to", "gonna": "is going to", "gotta": "has to", "am": "is", "be": "is"}


@lru_cache(maxsize=4096)
def _lemmas(word: str) -> dict[str, tuple[str, ...]]:
    return dict(lemminflect.getAllLemmas(word.lower()))


def tags(word: str) -> frozenset[str]:
    """The parts of speech lemminflect knows for ``word`` ("NOUN", "VERB", "ADJ", ...)."""
    return frozenset(_lemmas(word))


def is_verb(word: str) -> bool:
    low = word.lower()
    return low in _SPECIAL or low in MODALS or "VERB" in _lemmas(low) or "AUX" in _lemmas(low)


def is_adverb(word: str) -> bool:
    """An adverb that is not also a verb ("really", "finally"; not "fly", "apply")."""
    lemmas = _lemmas(word)
    return "ADV" in lemmas and "VERB" not in lemmas


def lemma(word: str) -> str:
    found = _lemmas(word).get("VERB") or _lemmas(word).get("AUX")
    return found[0] if found else word.lower()


def is_past(word: str) -> bool:
    """A simple past form ("went", "moved", "quit"); a base form identical to its past counts too."""
    low = word.lower()
    if not is_verb(low) or low in MODALS:
        return False
    return low in lemminflect.getInflection(lemma(low), tag="VBD")


def is_finite(word: str) -> bool:
    """A verb form that makes a clause of its own: a past ("lived"), a third-person present ("plays"),
    an auxiliary or modal ("is", "can")."""
    low = word.lower()
    if low in MODALS or low in ("am", "is", "are", "was", "were", "has", "have", "had", "does", "do", "did"):
        return True
    return is_past(low) or (is_verb(low) and low in lemminflect.getInflection(lemma(low), tag="VBZ"))


def is_base(word: str) -> bool:
    """The bare verb ("work", "go"), which a first-person subject takes in the present."""
    low = word.lower()
    return is_verb(low) and lemma(low) == low


def third_person(verb: str) -> str:
    """The third-person singular present of a base verb; anything else (pasts, modals) unchanged."""
    low = verb.lower()
    if low in _SPECIAL:
        out = _SPECIAL[low]
    elif low in MODALS or not low.isalpha() or not is_base(low):
        return verb
    else:
        forms = lemminflect.getInflection(low, tag="VBZ")
        out = forms[0] if forms else low + "s"
    return out[0].upper() + out[1:] if verb[:1].isupper() else out


def forms(phrase: str, *tags: str) -> list[str]:
    """The phrase with its first word (a verb) in each Penn tag's form: forms("give up", "VBD") ->
    ["gave up"]; the longest first, for a regex alternation."""
    verb, _, rest = phrase.partition(" ")
    found = {f for tag in tags for f in lemminflect.getInflection(verb, tag=tag)}
    return sorted((f"{f} {rest}".strip() for f in found), key=lambda f: (-len(f), f))


def alternation(phrases: str, *tags: str) -> str:
    """A regex group of every form of the comma-separated verb ``phrases`` (longest first)."""
    out = sorted(
        {f for phrase in phrases.split(",") for f in forms(phrase.strip(), *tags)}, key=lambda f: (-len(f), f)
    )
    return "(?:" + "|".join(re.escape(f).replace(r"\ ", r"\s+") for f in out) + ")"
