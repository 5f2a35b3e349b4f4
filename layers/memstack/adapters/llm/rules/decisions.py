"""What a statement does to the speaker's memories: the decisions of the rule-based extractor.

Each function takes one rewritten clause (``turn.Said``) and, when it applies, appends its
decision to the turn and says so: an attribute's new value, a completed goal, a changed
habit or plan, an ending or retraction, a contradiction. ``statements.statement`` tries
them in order of how specific they are.
"""

from __future__ import annotations

import re
from datetime import datetime

from memstack.adapters.llm.rules import cues
from memstack.adapters.llm.rules.attributes import AttributeValue, find_attributes, present, same_value
from memstack.adapters.llm.rules.rewrite import definite_subject, drop_duration, with_antecedent
from memstack.adapters.llm.rules.targets import (
    best_target,
    editable,
    most_similar,
    named_in,
    same_category_preference,
    topic,
)
from memstack.adapters.llm.rules.turn import (
    ADD,
    ATTRIBUTE,
    CHANGE,
    COMPLETION,
    ENDING,
    Decision,
    Said,
    Turn,
    op,
)
from memstack.domain.categories import categorise
from memstack.domain.time.relative import is_future
from memstack.models import Kind, MemoryRecord
from memstack.ports.llm import ExtractionOp

# See turn.LINK_SIMILARITY: a change links to a memory this much less close when both speak to one
# category.
_AGREEING_CATEGORY_ALLOWANCE = 0.1
# The clause's subject is the speaker ("I", "we"): not "my friend Jake just moved to Denver".
_SPEAKER_SUBJECT = re.compile(r"\b(?:I|we)\b", re.IGNORECASE)


def update(turn: Turn, target: MemoryRecord, said: Said, rank: int) -> None:
    """UPDATE ``target`` to what ``said`` says, "the concert" read as the concert the memory names."""
    text = with_antecedent(said.text, target.content, turn.subject)
    if text != said.text:
        said = Said(said.original, text, said.kind, said.category, said.event_time)
    turn.decisions.append(Decision(op("UPDATE", turn, target=target, said=said), rank))


def news_about_known(clause: str, said: Said, turn: Turn) -> bool:
    """ "The team offsite moved to Porto", "the Iceland trip is booked", "the concert was called
    off": news about something known. An ending counts when a memory names all it is about."""
    if (ended := cues.retraction(clause)) and any(
        named_in(ended.words, n.content, turn.subject) for n in turn.neighbours if editable(n)
    ):
        return True
    news = cues.CHANGE.search(said.original) or cues.COMPLETION.search(said.original)
    if not news:
        return False
    # "The party got postponed": the definite noun is the party a memory names.
    if (thing := definite_subject(said.original)) and any(
        named_in(thing, n.content, turn.subject) for n in turn.neighbours if editable(n)
    ):
        return True
    return best_target(said.text, turn.neighbours, turn.subject, min_shared=2) is not None


def retract(what: str, *, ending: bool, turn: Turn, said: Said | None) -> bool:
    """DELETE the memory a retraction takes back (UPDATE it to the event for an ending)."""
    if not topic(what, turn.subject) or cues.PRONOUN_OBJECT.match(what):
        # "We don't anymore", "I sold it": what was taken back is what was just talked about.
        return _retract_antecedent(ending=ending, turn=turn, said=said)
    target = best_target(what, turn.neighbours, turn.subject, exclude=turn.taken())
    if target is None:
        # "The conference got cancelled, so I'm not flying after all": taking back again what this
        # message already changed is part of that change, not a memory of its own (an ending,
        # "I left the bakery", is an event worth keeping either way).
        return not ending and best_target(what, turn.neighbours, turn.subject) is not None
    if ending and said is not None:
        ended = Said(said.original, said.text, Kind.EVENT, said.category, said.event_time)
        update(turn, target, ended, ENDING)
    else:
        turn.decisions.append(Decision(op("DELETE", turn, target=target), ENDING))
    return True


def _retract_antecedent(*, ending: bool, turn: Turn, said: Said | None) -> bool:
    """ "I sold it": "it" is the thing the last sentence with a topic named, a few sentences back at
    most; when that names no memory, nothing older is taken back in its place."""
    for earlier in turn.recent(anyone=True):
        if topic(earlier, turn.subject):
            if best_target(earlier, turn.neighbours, turn.subject):
                return retract(earlier, ending=ending, turn=turn, said=said)
            return False
    return False


def job_ending(said: Said, turn: Turn) -> bool:
    for n in turn.neighbours:
        attrs = {a.name for a in find_attributes(n.content, turn.subject)}
        if editable(n) and n.kind != Kind.EVENT and attrs & {"job_title", "employer"}:
            update(turn, n, said, CHANGE)
            return True
    return False


def attribute_update(said: Said, turn: Turn) -> bool:
    """NONE for a known value, UPDATE for a new value of a known attribute."""
    if is_future(said.original):
        return False  # "I'm moving to Osaka next month" is a plan, not yet where they live
    for attr in find_attributes(said.text, turn.subject):
        for n in turn.neighbours:
            if not editable(n):
                continue  # taken by a less specific decision is fine: the resolution keeps this one
            for old in find_attributes(n.content, turn.subject):
                if old.name != attr.name:
                    continue
                if same_value(old.value, attr.value):
                    turn.decisions.append(Decision(op("NONE", turn, target=n), ATTRIBUTE))
                    return True
                if n.kind == Kind.EVENT and old.name != "job_title":
                    # A past happening stays true: history, not state. Not a role: "started as a
                    # data engineer" is the job they held until a promotion says otherwise.
                    continue
                turn.decisions.append(Decision(_attribute_op(turn, n, old, attr, said), ATTRIBUTE))
                return True
    return False


def completion(said: Said, turn: Turn) -> bool:
    """ "Finished the Rust book" closes "trying to learn Rust": the goal becomes what happened."""
    if said.kind == Kind.PREFERENCE or not cues.COMPLETION.search(said.original):
        return False
    target = best_target(
        said.text,
        turn.neighbours,
        turn.subject,
        accept=lambda n: bool(cues.GOAL.search(n.content)),
        exclude=turn.taken(),
    )
    if target is None:
        return False
    done = Said(said.original, said.text, Kind.EVENT, said.category, said.event_time)
    update(turn, target, done, COMPLETION)
    return True


def change(said: Said, raw: str, turn: Turn) -> bool:
    """A habit, preference or plan that changed ("switched to X", "X instead", "moved X to Y")."""
    if not cues.CHANGE.search(raw) or cues.ADDITION.search(said.original):
        return False
    taken = turn.taken()
    if m := cues.SWITCH_FROM.search(said.original):
        target = best_target(m.group("old"), turn.neighbours, turn.subject, exclude=taken)
    else:
        target = best_target(
            said.text,
            turn.neighbours,
            turn.subject,
            accept=lambda n: _changeable(n, said, turn.message.timestamp),
            exclude=taken,
        )
        if (target is None and said.kind == Kind.PREFERENCE) or cues.SWITCH_TO.search(said.original):
            target = target or same_category_preference(said.text, turn.neighbours, taken)
    if target is None:
        target = _closest_in_meaning(said, turn, taken)
    if target is None:
        return False
    if target.kind != Kind.EVENT and said.kind == Kind.EVENT:
        # "I've switched to coffee" changes a preference: the new version is still a preference.
        said = Said(said.original, said.text, target.kind, said.category, said.event_time)
    update(turn, target, said, CHANGE)
    return True


def contradiction(said: Said, turn: Turn) -> bool:
    """ "I have never written a Flask route" beside "Wes implemented the login route in Flask":
    the speaker says something never happened that a current memory of theirs says did (or the
    other way round), and no word says it changed (a change, an ending or a correction would
    have been found first), so nothing says which holds. CONFLICT keeps both, linked, for the
    agent to ask. Only "never": other negations say too many other things ("not sure how",
    "can't wait", "wasn't easy"), and an LLM extractor judges those."""
    if not _SPEAKER_SUBJECT.search(said.original) or is_future(said.original):
        return False
    never = cues.never_claim(said.original)
    if not never and cues.negative(said.original):
        return False  # a negation other than "never": no plain statement of either side
    wanted = topic(said.text, turn.subject)

    def opposite(n: MemoryRecord) -> bool:
        # One says it never happened, the other plainly that it did; most of the shorter
        # one's topic words are shared: the two speak of the same thing.
        if never == cues.never_claim(n.content) or (never and cues.negative(n.content)):
            return False
        theirs = topic(n.content, turn.subject)
        return 2 * len(wanted & theirs) >= min(len(wanted), len(theirs))

    target = best_target(
        said.text, turn.neighbours, turn.subject, accept=opposite, min_shared=2, exclude=turn.taken()
    )
    if target is None:
        return False
    turn.decisions.append(Decision(op("CONFLICT", turn, target=target, said=said), ADD))
    return True


def _closest_in_meaning(said: Said, turn: Turn, taken: frozenset[str]) -> MemoryRecord | None:
    """The state a change of the speaker's own replaces when no word links them ("I've become a
    morning person" -> "is a night owl"): the neighbour closest in meaning, at least
    ``link_similarity`` close, or half-way closer when both speak to the same category."""
    if turn.embedder is None or not _SPEAKER_SUBJECT.search(said.original):
        return None
    found = most_similar(
        said.text,
        turn.neighbours,
        turn.subject,
        turn.embedder,
        accept=lambda n: _changeable(n, said, turn.message.timestamp),
        exclude=taken,
    )
    if found is None:
        return None
    target, similarity = found
    if similarity >= turn.link_similarity:
        return target
    category = categorise(said.original)
    agree = category is not None and category == categorise(target.content)
    return target if agree and similarity >= turn.link_similarity - _AGREEING_CATEGORY_ALLOWANCE else None


def _changeable(n: MemoryRecord, said: Said, now: datetime | None) -> bool:
    """A change replaces a current state, habit, preference or plan; a past happening stays true."""
    if n.kind == Kind.EVENT:
        ahead = n.event_time is not None and now is not None and n.event_time > now
        return bool(
            ahead
            or cues.RESCHEDULE.search(said.original)
            or cues.FUTURE.search(n.content)
            or is_future(n.content)
            or cues.GOAL.search(n.content)
        )
    # A habit replaces a liking and a liking a habit ("I love cycling to work" -> "these days I
    # take the bus"): both are states of the user.
    return True


def _attribute_op(
    turn: Turn, n: MemoryRecord, old: AttributeValue, new: AttributeValue, said: Said
) -> ExtractionOp:
    if old.stative and old.name != "job_title":
        # "lives in Tokyo with their partner" -> "lives in Osaka with their partner":
        # the rest of what the memory says stays true. Not for a job: "a barista at a cafe"
        # does not become "a designer at a cafe" (the rest is usually the old employer).
        # The state holds now: "has lived in Glasgow since university" -> "lives in Edinburgh".
        start, end = old.span
        head = n.content[:start]
        if old.verb is not None:
            head = head[: old.verb[0]] + present(n.content[old.verb[0] : old.verb[1]]) + head[old.verb[1] :]
        content = head + new.value + drop_duration(n.content[end:])
        category = n.category
        if category is None or not turn.lexicon.scores(content).get(category):
            # "lives in Edinburgh" is no longer educational because the old text said "since university".
            category = turn.lexicon.categorise(content) or said.category
        kept = Said(said.original, content, n.kind, category, said.event_time)
        return op("UPDATE", turn, target=n, said=kept)
    # "got promoted to analyst" replaces a state ("is a junior analyst"): the new version is that state.
    state = Said(said.original, said.text, n.kind, said.category, said.event_time)
    return op("UPDATE", turn, target=n, said=state)
