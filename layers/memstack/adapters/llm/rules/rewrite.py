"""First person to third person: "I live with my partner" -> "Maya lives with Maya's partner".

A memory is read later, out of its conversation, by an agent that is not the
speaker, so it names who it is about. Verbs after "I" (and verbs coordinated
with it: "I live in Osaka and work as a nurse") take the third-person form
from ``grammar`` (lemminflect); a compound subject ("my wife and I run a
bakery") keeps its plural verb.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memstack.adapters.llm.rules import grammar
from memstack.adapters.llm.rules.grammar import word_set
from memstack.adapters.llm.rules.refs import PERSON_WORDS
from memstack.adapters.llm.rules.we import FAMILY, HOUSEHOLD, OTHERS, TEAM
from memstack.domain.time.calendar_words import MONTH_NAMES, WEEKDAY_NAMES

ADVERBS = word_set(
    "actually already also always currently even finally just mostly never now often only "
    "rarely really recently sometimes still usually"
)
FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'll|us|our|ours)\b", re.I
)
# Who "we" is, said as one: its verb follows it as it follows "she".
SINGULAR = frozenset((HOUSEHOLD,))
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


def to_third_person(
    text: str,
    subject: str,
    listener: str | None = None,
    *,
    household: bool | None = None,
    we: str | None = None,
) -> str:
    """Rewrite first-person pronouns (and "you", when the ``listener`` is known) for ``subject``.

    ``we``: who "we" is, a template of ``rules.we`` ("{S}'s team"); else ``household``: "we" is
    the speaker's family (default: when the speaker is named), or "and others"."""
    text = text.replace("’", "'")
    # "you know", "you see": fillers, not the listener.
    text = re.sub(r",?\s*\byou (?:know|see)\b,?", "", text, flags=re.IGNORECASE).strip() or text
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
    # "We": in a chat of two people, the speaker's household; a user talking to an assistant
    # (named or not) says "we" of a team, a company or a household alike, so nothing more is
    # claimed there.
    if household is None:
        household = subject != "The user"
    we = we or (FAMILY if household else OTHERS)
    group, group_mid = we.format(S=subject, M=mid), we.format(S=mid, M=mid)

    def name(m: re.Match[str]) -> str:
        # Sentence-initial "The user", elsewhere "the user"; a proper name stays as is.
        return subject if m.start() == 0 else mid

    def possessive(m: re.Match[str]) -> str:
        # "Our" after the group it belongs to is that group's ("Maya's team moved their office");
        # "my" is always the speaker's by name: "their" beside other people ("Maya and Kenji",
        # "Maya's sister") could be anyone's, and read later it names no one.
        before = text[: m.start()]
        group_before = group != subject and (group in before or group_mid in before)
        if m.group(0).lower() == "our" and group_before:
            return "their" if m.group(0)[0].islower() else "Their"
        if m.group(0).lower() == "our" and we == TEAM and not re.match(r"\s+team\b", text[m.end() :], re.I):
            # "I'm leading the migration of our batch jobs": the team's, not the speaker's by name
            # again ("Maya is leading the migration of Maya's batch jobs"); whose team, once.
            return "the team's" if subject in before or mid in before else name(m) + "'s team's"
        return name(m) + "'s"

    if subject == "The user":
        # "my users" are the people who use what the user makes: not "the user's users".
        text = re.sub(r"\b(my|our)\s+(users?)\b", r"\1 end \2", text, flags=re.IGNORECASE)
    # A compound subject keeps its plural verb: "my wife and I run" -> "Lena and Lena's wife run".
    text = re.sub(
        r"\b[Mm]y ((?:[\w'-]+ ){0,2}?[\w'-]+) and I\b", lambda m: f"{name(m)} and {mid}'s {m.group(1)}", text
    )
    text = re.sub(
        r"\b([A-Z][\w'-]+) and I\b",
        lambda m: m.group(0) if _not_a_name(m.group(1)) else f"{m.group(1)} and {mid}",
        text,
    )
    if we in SINGULAR:
        # "Omar's household flies from Stansted": one household, one verb form (a team stays a
        # collective: "Maya's team use Terraform").
        def one_group(m: re.Match[str]) -> str:
            return group if m.start() == 0 else group_mid

        for pattern, verb in (
            (r"\bwe(?:'re| are)\b", "is"),
            (r"\bwe(?:'ve| have)\b", "has"),
            (r"\bwe were\b", "was"),
        ):
            text = re.sub(pattern, lambda m: f"{one_group(m)} {verb}", text, flags=re.IGNORECASE)  # noqa: B023
        text = _conjugate_after_subject(text, "(?i:we)", one_group)
    rules: list[tuple[str, Callable[[re.Match[str]], str]]] = [
        (r"\bI(?:'m| am)\b", lambda m: name(m) + " is"),
        (r"\bI(?:'ve| have)\b", lambda m: name(m) + " has"),
        (r"\bI'd\b", lambda m: name(m) + " would"),
        (r"\bI'll\b", lambda m: name(m) + " will"),
        (r"\bI (?:don't|dont)\b", lambda m: name(m) + " doesn't"),
        (r"\bI do not\b", lambda m: name(m) + " does not"),
        (r"\bwe(?:'re| are)\b", lambda m: (group if m.start() == 0 else group_mid) + " are"),
        (r"\bwe've\b", lambda m: (group if m.start() == 0 else group_mid) + " have"),
        (r"\bwe'll\b", lambda m: (group if m.start() == 0 else group_mid) + " will"),
        (r"\bwe\b", lambda m: group if m.start() == 0 else group_mid),
        (r"\bus\b", lambda m: group_mid),
        (r"\bmyself\b", lambda m: "themselves"),
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


def _not_a_name(word: str) -> bool:
    """ "However and I ...": an opening word, not a person the speaker did something with."""
    return grammar.is_adverb(word) or word.lower() in _OPENINGS


_OPENINGS = word_set("however so but and then now yes no well also still right fine okay ok today tomorrow")


# "since university", "for six years": how long the old value held, false of the new one.
_DURATION = re.compile(
    r"\s+(?:since|for (?:\w+ )?(?:years?|months?|weeks?|decades?|ages|a while|a long time))\b"
    r"(?:(?!\s+(?:and|but)\b)[^,.;!?])*",
    re.I,
)


def drop_duration(tail: str) -> str:
    """What followed a replaced value, without the time it held for."""
    return _DURATION.sub("", tail, count=1)


# "The party got postponed", "the festival moved to June": a definite noun, then its verb.
_DEFINITE = re.compile(
    r"^The\s+(?P<noun>[a-z][\w-]*)\b(?=\s+(?:got|was|were|has|have|had|is|are|[a-z]+ed)\b)", re.I
)


def definite_subject(text: str) -> str | None:
    """ "The party got postponed" -> "party": the known thing a sentence is news about."""
    m = _DEFINITE.match(text)
    return m.group("noun") if m else None


def with_antecedent(text: str, known: str, subject: str) -> str:
    """ "The concert was called off" about "Kai is going to a concert in Leeds on 23 November":
    "Kai's concert in Leeds on 23 November was called off" (a memory names what it is about)."""
    m = _DEFINITE.match(text)
    if m is None:
        return text
    noun = m.group("noun")
    owner = rf"(?:a|an|the|their|{re.escape(subject)}'s)"
    found = re.search(
        rf"\b{owner}\s+(?P<np>(?:[\w-]+\s+){{0,2}}?{re.escape(noun)}"
        r"(?:\s+(?:in|on|at|for|with|to|from|of)\s+[^,.;!?]+?)?)(?=[,.;!?]|\s+(?:and|but|so|which|that)\b|$)",
        known,
        re.IGNORECASE,
    )
    if found is None:
        return text
    owner_name = "the user" if subject == "The user" else subject
    return f"{owner_name[:1].upper()}{owner_name[1:]}'s {found.group('np')}{text[m.end() :]}"


# A third-person pronoun that opens a sentence ("She's called Pepper").
_PRONOUN_OPENING = re.compile(r"^(?P<pronoun>He|She|It|Her|His|Its)(?=(?:'s|'ll|'d)?\b)")
# "Her name is Biscuit": whose; the antecedent is looked up as for the subject pronoun.
_POSSESSIVE_OF = {"Her": "She", "His": "He", "Its": "It"}
_DETERMINED = re.compile(r"\b(?P<det>(?i:my|our|a|an))\s+(?P<words>[a-zA-Z][\w-]*(?:\s+[a-zA-Z][\w-]*){0,3})")
_NAMED = re.compile(r"(?<=\s)(?P<name>[A-Z][a-z]+)\b")
_NOT_IN_A_NOUN_PHRASE = word_set(
    "last next this every ago today yesterday tomorrow week month year weekend and or but who that which"
)
_CALENDAR = frozenset(MONTH_NAMES) | frozenset(WEEKDAY_NAMES)
_CALENDAR_WORDS = frozenset(w.lower() for w in _CALENDAR)
_PLACE_PREPOSITIONS = word_set("in at on from near of to into outside")
# "I adopted a greyhound" makes it theirs: "my greyhound"; "I went to a concert": "the concert".
_GETTING = word_set("have has had got get adopted bought own owned found rescued started made")


def _tags(word: str) -> frozenset[str]:
    """lemminflect's tags; a capitalised word it does not know is a name ("our CI", "my FastAPI app")."""
    tags = grammar.tags(word)
    return frozenset({"NOUN"}) if word[:1].isupper() and not tags else tags


def _noun_phrase(words: list[str]) -> str | None:
    """Modifiers and head of a noun phrase ("new car", "greyhound"), read with lemminflect's tags:
    a noun ends it unless a noun that is no verb follows ("dog walker", not "sister lives")."""
    out: list[str] = []
    for i, word in enumerate(words):
        if word in _NOT_IN_A_NOUN_PHRASE or word.lower() in _CALENDAR_WORDS:
            break
        tags = _tags(word)
        if "NOUN" in tags:
            out.append(word)
            after = _tags(words[i + 1]) if i + 1 < len(words) else frozenset()
            if words[i + 1 : i + 2] == [] or "NOUN" not in after or "VERB" in after:
                return " ".join(out)
        elif "ADJ" in tags:
            out.append(word)
        else:
            break
    return None


def _person_name(m: re.Match[str], text: str) -> bool:
    """A capitalised word that may name a person: not a date word, not a place after "in", "at"."""
    name = m.group("name")
    before = text[: m.start()].split()
    return (
        name != "I"
        and name.lower() not in _CALENDAR
        and not (before and (before[-1].lower() in _PLACE_PREPOSITIONS or before[-1][:1].isdigit()))
    )


def _antecedent(pronoun: str, previous: str) -> str | None:
    """What he/she/it refers to in the previous sentence: its subject when that is a thing of the
    speaker's ("My sister lives in Leeds"), else the last thing it introduced (or, for he/she,
    named)."""
    found: list[tuple[int, str]] = []
    for d in _DETERMINED.finditer(previous):
        phrase = _noun_phrase(d.group("words").split())
        if phrase is None or (pronoun == "It" and phrase.split()[-1].lower() in PERSON_WORDS):
            continue  # "My teacher is strict. It has ...": "it" is no person
        det = d.group("det").lower()
        before = previous[: d.start()].split()
        got = bool(before) and before[-1].lower() in _GETTING
        noun = f"{'My' if det in ('my', 'our') or got else 'The'} {phrase}"
        if d.start() == 0:
            compound = previous[d.start("words") + len(phrase) :].lstrip().startswith("and ")
            if pronoun != "It" or not compound:
                return noun
        elif pronoun != "It" or got:
            # "it" is often the event just told ("I went to Paris with my mum. It was lovely"):
            # only a thing the speaker got is safely what "it" means.
            found.append((d.start(), noun))
    if pronoun != "It":
        found += [
            (n.start(), n.group("name")) for n in _NAMED.finditer(previous) if _person_name(n, previous)
        ]
    return max(found)[1] if found else None


def resolve_pronoun(sentence: str, previous: str) -> str:
    """ "I adopted a greyhound. She's called Pepper." -> "My greyhound is called Pepper.": a
    sentence opened by he/she/it, after a sentence of the speaker's, says who or what it is about."""
    m = _PRONOUN_OPENING.match(sentence)
    if m is None or not is_first_person(previous):
        return sentence
    pronoun = m.group("pronoun")
    noun = _antecedent(_POSSESSIVE_OF.get(pronoun, pronoun), previous)
    if noun is None:
        return sentence
    if pronoun in _POSSESSIVE_OF:
        if sentence[m.end() :].startswith("'"):
            return sentence  # "Her's", "Its'": no possessive to read
        return noun + "'s" + sentence[m.end() :]
    rest = re.sub(
        r"^'s\b", " is", re.sub(r"^'ll\b", " will", re.sub(r"^'d\b", " would", sentence[m.end() :]))
    )
    return noun + rest
