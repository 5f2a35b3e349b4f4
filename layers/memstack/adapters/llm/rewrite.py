"""First person to third person: "I live with my partner" -> "Maya lives with their partner".

A memory is read later, out of its conversation, by an agent that is not the
speaker, so it names who it is about. Verbs after "I" (and verbs coordinated
with it: "I live in Osaka and work as a nurse") take the third-person form
from ``grammar`` (lemminflect); a compound subject ("my wife and I run a
bakery") keeps its plural verb.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memstack.adapters.llm import grammar
from memstack.adapters.llm.grammar import word_set

ADVERBS = word_set(
    "actually already also always currently even finally just mostly never now often only "
    "rarely really recently sometimes still usually"
)
FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'll|us|our|ours)\b", re.I
)
# Present-tense context: "these days I mostly read sci-fi" (read is present, not past).
_PRESENT_CUE = re.compile(
    r"\b(?:now|these days|nowadays|usually|often|always|mostly|every|each|daily|weekly|sometimes|tend to)\b",
    re.I,
)
# Verbs whose past is their base form: read as past unless the sentence says "now", "usually", ...
_SAME_PAST = word_set("quit read put set cut hit let hurt cost shut")
# After a coordinated verb ("... and work as ..."), a word that starts its complement.
_COMPLEMENT = word_set("a an the my our as at in on to with for from every it them him her some two three")


def subject_name(speaker: str | None) -> str:
    """Who first-person text is about: the speaker's name, else "The user"."""
    if speaker and speaker.strip().lower() not in ("user", "me", "i", "human"):
        return speaker.strip()
    return "The user"


def is_first_person(text: str) -> bool:
    return bool(FIRST_PERSON.search(text.replace("’", "'")))


def conjugate(verb: str, present: bool = False) -> str:
    """The verb as it follows a third-person singular subject."""
    if verb.lower() in _SAME_PAST and not present:
        return verb
    return grammar.third_person(verb)


def _conjugate_word(word: str, present: bool) -> str:
    core = word.rstrip(",;:")
    return conjugate(core, present) + word[len(core) :]


def _is_adverb(word: str) -> bool:
    return word.lower() in ADVERBS or grammar.is_adverb(word)


def _conjugate_after_subject(text: str, marker: str, name: Callable[[re.Match[str]], str]) -> str:
    """``I [adverbs] verb [... and verb]`` -> ``<name> [adverbs] verbs [... and verbs]``."""
    present = bool(_PRESENT_CUE.search(text))

    def clause(m: re.Match[str]) -> str:
        words = m.group("rest").split(" ")
        i = 0
        while i < len(words) - 1 and _is_adverb(words[i]):
            i += 1
        if words[i] and grammar.is_verb(words[i].rstrip(",;:")):
            words[i] = _conjugate_word(words[i], present)
            # Coordinated verbs of the same subject: "and work as a nurse".
            for j in range(i + 1, len(words) - 2):
                if words[j - 1].endswith((",", ";")):
                    break
                if words[j] == "and" and grammar.is_base(words[j + 1]) and words[j + 2] in _COMPLEMENT:
                    words[j + 1] = _conjugate_word(words[j + 1], present)
        return name(m) + " " + " ".join(words)

    # Each clause runs to the end of the sentence or to the next "I".
    return re.sub(rf"\b{marker}\s+(?P<rest>(?:(?!\b{marker}\b)[^.;!?])*)", clause, text)


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

    # A compound subject keeps its plural verb: "my wife and I run" -> "Lena and their wife run".
    text = re.sub(
        r"\b[Mm]y ((?:[\w'-]+ ){0,2}?[\w'-]+) and I\b", lambda m: f"{name(m)} and their {m.group(1)}", text
    )
    text = re.sub(r"\b([A-Z][\w'-]+) and I\b", lambda m: f"{m.group(1)} and {mid}", text)
    rules: list[tuple[str, Callable[[re.Match[str]], str]]] = [
        (r"\bI(?:'m| am)\b", lambda m: name(m) + " is"),
        (r"\bI(?:'ve| have)\b", lambda m: name(m) + " has"),
        (r"\bI'd\b", lambda m: name(m) + " would"),
        (r"\bI'll\b", lambda m: name(m) + " will"),
        (r"\bI (?:don't|dont)\b", lambda m: name(m) + " doesn't"),
        (r"\bI do not\b", lambda m: name(m) + " does not"),
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
    text = _conjugate_after_subject(text, "I", name)
    text = re.sub(r"\bI\b", lambda m: name(m), text)
    # Possessives last: "their" needs the subject already written before it.
    for word in ("my", "our"):
        text = re.sub(rf"\b{word}\b", possessive, text, flags=re.IGNORECASE)
    return text
