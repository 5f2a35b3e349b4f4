"""One statement (a clause) of the speaker's: whether it is worth a memory, its rewrite, its decision.

``rewrite`` turns the clause into the memory's text (third person, dates resolved, "we" read
from the speaker's words) with a kind and a category; ``statement`` drops what is not a
fact about the speaker (questions, requests, talk about the listener, small talk without a
topic), then tries the decisions (``decisions``) from the most specific down, and ADDs
what none of them took, unless it restates something known.
"""

from __future__ import annotations

import re

from memstack.adapters.llm.rules import cues, decisions, grammar, subjectless
from memstack.adapters.llm.rules.refs import resolve_references
from memstack.adapters.llm.rules.rewrite import is_first_person, to_third_person
from memstack.adapters.llm.rules.turn import ADD, Decision, Said, Turn, op
from memstack.adapters.llm.rules.we import TEAM, we_from
from memstack.domain.categories import lexicon_for
from memstack.domain.text import STOPWORDS, words
from memstack.domain.time.relative import resolve_relative_dates
from memstack.models import Category, Kind

# Preferences are the user's own: "I (really) love ...", "my favourite ...", "please don't ...".
_PREFERENCE = re.compile(
    r"\b(?:I|we)(?:\s+(?:really|also|just|still|absolutely|totally|do|don't|do not|\w+ly))*\s+"
    r"(?:like|love|enjoy|prefer|hate|dislike|adore|can't stand|cannot stand|am a fan of|'m a fan of)\b"
    r"|\b(?:my|our) (?:all-time )?favou?rite\b|\bplease (?:don't|do not|always|never|use|keep|avoid|answer|"
    r"reply|respond|write|talk|call)\b|\b(?:I'm|I am) (?:a )?(?:big )?fan of\b|\bwork(?:s)? better for me\b",
    re.IGNORECASE,
)
_NOT_PREFERENCE = re.compile(
    r"\b(?:would|'d) (?:like|love) to\b|\blooks like\b|\bfeels like\b", re.IGNORECASE
)
_FIRST_VERB = re.compile(
    r"\b(?:I|we)(?P<perfect>'ve| have)?(?:\s+(?:just|finally|already|also|recently|\w+ly))*"
    r"\s+(?P<verb>[a-z']+)",
    re.IGNORECASE,
)
# "I've lived here since 2019", "we've worked there for six years": a perfect that lasts is a state.
_LASTING = re.compile(
    r"\b(?:since|for (?:\w+ )?(?:years?|months?|weeks?|decades?|ages|a while|a long time|long))\b"
    r"|\b(?:all my life|ever since)\b",
    re.IGNORECASE,
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'll|you'd)\b", re.IGNORECASE)
_INSTRUCTION = re.compile(r"^(?:please|always|never|don't|do not|avoid|stop)\b", re.IGNORECASE)
_NAME = re.compile(r"(?i:I'm|I am|my name is|call me)\s+([A-Z][\w-]*)[.!]?")
# A sentence about neither speaker must speak clearly to some category to be worth keeping.
_MIN_TOPIC_SCORE = 2.0
RESTATEMENT_OVERLAP = 0.7
# "The cluster is EKS 1.29", "The orders database is MySQL 5.7", "The blocker is django-oscar": a thing
# of the speaker's and what it is, named (a capitalised word, a number, a version, a package name).
# Said tersely, without the "the" ("Stack is Rails 7.", "DB is Postgres 15"): the same, when the word
# is a common noun or an acronym ("Kafka is 3.6" names no thing of the speaker's).
_THE_THING = re.compile(
    r"^(?:The\s+(?P<thing>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)|(?P<bare>[A-Z][a-z]*[\w-]*|[A-Z]{2,5}))\b"
    r"(?=\s+(?:is|are|was|were|has|have|runs|uses|calls|takes)\b)"
)
_NAMED_THING = re.compile(r"(?<=\s)(?:[A-Z][\w.+-]*|[\w.-]*\d[\w.-]*|[a-z]+[-_.][a-z]\w*)")
# Opening words that are not a thing of the speaker's: "Everything is on Render", "Nothing runs".
_NOT_A_THING = grammar.word_set(
    "everything nothing something anything everyone nobody someone anyone this that it there here what "
    "which who one none all both each either neither another other others"
)
# "We", "us" and "our": who they are is read from the speaker's words (``rules.we``), this message's
# and their last few turns'.
# "Our" too: "our batch jobs" at work are the team's.
_WE = re.compile(r"\b(?:we|we're|we've|we'll|us|our)\b", re.IGNORECASE)


# The built-in topics (whatever the tenant's categories): what is said of work is the team's doing.
_BUILT_IN = lexicon_for()
_AT_WORK = frozenset((str(Category.PROFESSIONAL), str(Category.TECHNICAL_SKILLS)))


def _content_words(text: str) -> set[str]:
    return {w.rstrip("s") for w in words(text) if w not in STOPWORDS and len(w) > 1}


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of content words (plural s ignored)."""
    wa, wb = _content_words(a), _content_words(b)
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def kind_of(sentence: str, dated: bool) -> Kind:
    if _INSTRUCTION.match(sentence) or (
        _PREFERENCE.search(sentence) and not _NOT_PREFERENCE.search(sentence)
    ):
        return Kind.PREFERENCE
    if dated:
        return Kind.EVENT
    m = _FIRST_VERB.search(sentence)
    if m:
        verb = m.group("verb").lower()
        if m.group("perfect") and _LASTING.search(sentence):
            return Kind.FACT
        if verb not in ("was", "were", "had", "used", "need", "needed") and grammar.is_past(verb):
            if verb not in ("read", "put", "set", "cut", "let", "hit", "hurt", "cost", "shut") or dated:
                return Kind.EVENT
            if verb == "quit":
                return Kind.EVENT
    return Kind.FACT


def rewrite(clause: str, turn: Turn) -> Said:
    when = turn.message.timestamp
    resolved = resolve_relative_dates(clause, when) if when else None
    said = resolved.text if resolved else clause
    we = (
        we_from(said, turn.own_before, _known(turn), to_assistant=not turn.household)
        if _WE.search(said)
        else None
    )
    if we is None and not turn.household and _WE.search(said) and _BUILT_IN.categorise(said) in _AT_WORK:
        we = TEAM  # told to an assistant, about work ("leading the migration of our batch jobs"): the team

    text = to_third_person(said, turn.subject, turn.listener, household=turn.household, we=we)
    text = text[0].upper() + text[1:]
    if text[-1] not in ".!?":
        text += "."
    dated = bool(resolved and resolved.event_time)
    kind = kind_of(clause, dated)
    event_time = resolved.event_time if resolved and resolved.event_time else None
    if kind == Kind.EVENT and event_time is None:
        event_time = when
    # Categorise the words the user said: the rewrite adds words ("and family") of its own.
    bonus = {str(Category.PREFERENCES): 1.5} if kind == Kind.PREFERENCE else None
    category = turn.lexicon.categorise(said, bonus) or turn.lexicon.fallback(kind)
    return Said(clause, text, kind, category, event_time)


def _known(turn: Turn) -> list[str]:
    """What the speaker's memories say of them, back in their first person ("Maya's partner Kenji"
    -> "my partner Kenji"): who "we" is when the last turns do not say."""
    own = f"{turn.subject}'s" if turn.subject != "The user" else "the user's"
    return [re.sub(re.escape(own), "my", n.content, flags=re.IGNORECASE) for n in turn.neighbours]


def _setting(clause: str, turn: Turn) -> str | None:
    """ "The cluster is EKS 1.29 with about 30 nodes", told to an assistant: what the speaker works
    with, said with "the" (the assistant has no cluster of its own): "My cluster is EKS 1.29 ...";
    said tersely, "Stack is Rails 7." is "My stack is Rails 7."."""
    if turn.listener != "the assistant" or not (m := _THE_THING.match(clause)):
        return None
    if not _NAMED_THING.search(clause, m.end()):
        return None
    if m.group("thing"):
        return "My" + clause[3:] if len(clause.split()) >= 4 else None
    thing = m.group("bare")
    if not (thing.isupper() or "NOUN" in grammar.tags(thing.lower())) or thing.lower() in _NOT_A_THING:
        return None
    return "My " + (thing if thing.isupper() else thing.lower()) + clause[m.end() :]


def with_references(clause: str, turn: Turn) -> str:
    """ "take her to Nara": whom, where; the sentence's own earlier clauses first."""
    speakers = (turn.subject, turn.listener or "")
    return resolve_references(clause, turn.clauses_before + turn.recent(), speakers)


def statement(clause: str, raw: str, turn: Turn) -> None:
    """The decision one clause makes, if any (``raw``: the whole sentence as said)."""
    if len(words(clause)) < 2 or clause.endswith("?") or cues.REQUEST.match(clause):
        return  # "Book me a window seat, I always get airsick": the request is not a memory, the rest is
    name = _NAME.fullmatch(clause)
    if name:
        if name.group(1).casefold() == turn.subject.casefold():
            return  # introducing themselves by the name we already know them by
        clause = f"My name is {name.group(1)}."
    clause = subjectless.with_speaker(clause, asked=turn.asked)
    clause = with_references(clause, turn)
    first_person = is_first_person(clause)
    instruction = bool(_INSTRUCTION.match(clause))  # "Please keep your answers short": a preference
    about_listener = bool(_SECOND_PERSON.search(clause))
    topical = turn.lexicon.topicality(clause) >= _MIN_TOPIC_SCORE
    said = rewrite(clause, turn)
    if not (first_person or instruction):
        if about_listener:
            return  # about the other speaker
        if (setting := _setting(clause, turn)) is not None:
            said = rewrite(setting, turn)
        elif (
            not topical
            and not (turn.mentioned and clause.startswith(turn.mentioned))
            and not decisions.news_about_known(clause, said, turn)
        ):
            return  # small talk without a topic
    if (ending := cues.retraction(clause)) and decisions.retract(
        ending.words, ending=ending.ending, turn=turn, said=said
    ):
        return
    if cues.JOB_ENDING.search(clause) and decisions.job_ending(said, turn):
        return
    if (
        decisions.attribute_update(said, turn)
        or decisions.completion(said, turn)
        or decisions.change(said, raw, turn)
        or decisions.contradiction(said, turn)
    ):
        return
    for n in turn.neighbours:
        if overlap(said.text, n.content) >= RESTATEMENT_OVERLAP:
            turn.decisions.append(Decision(op("NONE", turn, target=n), ADD))
            return
    if any(d.op.content and overlap(said.text, d.op.content) >= RESTATEMENT_OVERLAP for d in turn.decisions):
        return
    turn.decisions.append(Decision(op("ADD", turn, said=said), ADD))
