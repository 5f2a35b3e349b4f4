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
from memstack.domain.text import STOPWORDS

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
        contraction = _CONTRACTIONS.get((m.group("contraction") or "").lower(), m.group("contraction") or "")
        if contraction == "" and not rest.lstrip()[:1].islower():
            return sentence
        # "My in-laws are retiring to Spain. They bought a house near Malaga.": the speaker's people
        # named just before, who keep their plural verb.
        if (people := refs.people(earlier[:_THEY_REACH])) is not None:
            return people[:1].upper() + people[1:] + contraction + rest
        who = None if people_only else _organisation(earlier[:_THEY_REACH])
        if who is None:
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
            return found[-1].rstrip(".")  # "with Klarna." ends its sentence: the full stop is no part of it
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


# "It" and "it" as the thing the speaker last named: "I'm building a habit tracker app in Flutter."
# ... "I want to get it on the Play Store before March." A thing is the speaker's when they say "my
# X" or have, get, make or run "a X"; the newest sentence of theirs that names one, a few sentences
# back at most (``turn.PRONOUN_REACH``), is what "it" means; a sentence that names none ("Took it
# out on Sunday.") passes "it" on.
_THING = re.compile(r"\b(?P<det>[Mm]y|[Oo]ur|an?)\s+(?P<words>(?:[^,.;:!?()\[\]]|\.(?=\S))+)")
_OWNING = grammar.word_set(
    "have get buy own adopt rescue find build maintain run manage start make write develop"
)
_THING_WORDS_MAX = 5
_WHAT_IT_IS = re.compile(r"^\s+is\s+an?\s+(?P<words>(?:[^,.;:!?()\[\]]|\.(?=\S))+)")
# After the verb, what makes "it" a thing moved, put or taken somewhere: "get it on", "moving it off".
_IT_OBJECT = re.compile(
    r"\b(?P<verb>[a-z]+)\s+it\b(?!')(?=\s+(?:off|on|onto|out|into|to|from|over|back|down|up|in|at|away)\b)"
)
# Verbs whose "it" is no thing: "made it to the final", "take it easy", "get it over with".
_IT_IDIOMS = grammar.word_set("make take be do")
# Not "It's a seq scan", "It's a mild sprain": "it" is then the situation, what it turned out to be.
_OPENING_IT = re.compile(
    r"^It(?P<verb>'s|\s+is|\s+was|\s+has|\s+(?P<other>[a-z]{2,}s))\b"
    r"(?!(?<=s|')\s+(?:(?:just|only|probably|definitely|basically|actually|clearly)\s+)?(?:a|an|the)\b)"
)
# Any other verb of the thing's ("It uses git under the hood", "It runs on both my laptops"), but the
# verbs "it" is said with of no thing: "It seems", "It depends", "It takes time", "It makes sense".
_IMPERSONAL = grammar.word_set(
    "seem look sound feel mean depend happen matter appear turn go come get help make take keep"
)
# "It's been tough", "It was amazing!": how something went, not a fact about a thing.
_VERDICT_REST = re.compile(
    r"^\s+(?:(?:so|really|very|super|pretty|totally|just|such|quite|too)\s+)*[\w-]+\s*[.!]*$"
)
_IT_VERB = {"'s": " is"}


def _chunk(tokens: list[str]) -> str | None:
    """The noun phrase ``tokens`` open with: nouns, adjectives, names and versions up to the first
    other word ("habit tracker app" of "habit tracker app in Flutter")."""
    out: list[str] = []
    for i, token in enumerate(tokens[:_THING_WORDS_MAX]):
        low = token.lower()
        tags = grammar.tags(low)
        # "a budgeting app", "running shoes": a gerund before the noun it describes
        following = grammar.tags(tokens[i + 1].lower()) if i + 1 < len(tokens) else frozenset({"END"})
        modifier = low.endswith("ing") and ("NOUN" in following or not following)
        if low in STOPWORDS or not (tags & {"NOUN", "ADJ"} or not tags or token[:1].isdigit() or modifier):
            break
        out.append(token)
    while out and grammar.tags(out[-1].lower()) == frozenset({"ADJ"}):
        out.pop()
    return " ".join(out) or None


def _thing(sentence: str) -> str | None:
    """The first thing of the speaker's ``sentence`` names ("my side project", "an Airflow 2.7
    deployment" after "I maintain"), as "my ..."."""
    for m in _THING.finditer(sentence):
        if m.group("det").lower() in ("a", "an"):
            before = sentence[: m.start()].split()
            if not before or grammar.lemma(before[-1].lower().strip(",")) not in _OWNING:
                continue
        phrase = _chunk(m.group("words").split())
        if phrase and phrase.split()[-1].lower() not in refs.PERSON_WORDS:
            # "My side project is a Next.js 14 app": what it is names it better.
            after = sentence[m.start("words") + len(phrase) :]
            if (what := _WHAT_IT_IS.match(after)) and (named := _chunk(what.group("words").split())):
                return "my " + named
            return "my " + phrase
    return None


def last_thing(earlier: Iterable[str]) -> str | None:
    """The thing "it" means: named in the newest of ``earlier`` (newest first) that names one."""
    for text in earlier:
        if found := _thing(text):
            return found
    return None


def resolve_it(sentence: str, earlier: Iterable[str], *, opening_only: bool) -> str:
    """``sentence`` with an opening "It is / It's / It has ..." (and, unless ``opening_only``, an
    "it" moved somewhere: "moving it off Vercel") as the speaker's thing named ``earlier``."""
    opening = _OPENING_IT.match(sentence)
    if opening and _VERDICT_REST.match(sentence[opening.end() :]):
        opening = None
    if opening and (other := opening.group("other")):
        lemma = grammar.lemma(other)
        if lemma == other or not grammar.is_verb(other) or lemma in _IMPERSONAL:
            opening = None
    moved = None if opening_only else _IT_OBJECT.search(sentence)
    if moved and grammar.lemma(moved.group("verb")) in _IT_IDIOMS:
        moved = None
    if not opening and not moved:
        return sentence
    thing = last_thing(earlier)
    if thing is None:
        return sentence
    if opening:
        verb = opening.group("verb")
        return "My" + thing[2:] + _IT_VERB.get(verb, verb) + sentence[opening.end() :]
    assert moved is not None
    return sentence[: moved.start()] + f"{moved.group('verb')} {thing}" + sentence[moved.end() :]


# "Where is she going?", "When does it expire?": a question about someone or something the speaker named.
_QUESTION_SUBJECT = re.compile(
    r"^(?P<wh>(?:where|when|what|how|which|who)(?:\s+\w+)?\s+(?:is|are|was|were|does|do|did|will|has|have)\s+)"
    r"(?P<pronoun>she|he|it|they)\b",
    re.IGNORECASE,
)


def question_subject(question: str, earlier: Iterable[str], speakers: Iterable[str] = ()) -> str:
    """``question`` (``answers.question_of``) with its subject pronoun as what the speaker it is put to
    named ``earlier`` (their words, newest first): "where is she going" after "My daughter is starting
    university" is "where is my daughter going"; else as it is."""
    m = _QUESTION_SUBJECT.match(question)
    if m is None:
        return question
    pronoun, earlier = m.group("pronoun").lower(), list(earlier)
    if pronoun == "it":
        who = last_thing(earlier)
    elif pronoun == "they":
        who = refs.people(earlier[:_THEY_REACH])
    else:
        who = refs.person("her" if pronoun == "she" else "him", earlier, frozenset(speakers))
    if who is None:
        return question
    who = who[:1].lower() + who[1:] if who.lower().startswith("my ") else who
    return m.group("wh") + who + question[m.end() :]
