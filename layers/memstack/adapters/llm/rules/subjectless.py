"""A clause that leaves out its "I": "Mostly building pipelines in Python.", "Moved to Cardiff in March."

The speaker means themselves; the clause is given its "I" back so that it is read like
anything else they said.
"""

from __future__ import annotations

import re

from memstack.adapters.llm.rules import cues, grammar

# A verb that makes a leading gerund the subject of its own clause ("Building pipelines is fun").
_FINITE = re.compile(
    r"\b(?:is|are|was|were|has|have|had|does|do|did|will|would|can|could|should|makes?|keeps?|takes?)\b",
    re.IGNORECASE,
)
_OBJECT_START = grammar.word_set("the a an my our to at in up out from with as his her their")


def with_speaker(clause: str, *, asked: bool) -> str:
    """``clause`` with the speaker's "I" put back where it was left out (``asked``: the message
    answers a question put to the speaker); else ``clause`` as it is."""
    if asked and (answer := _gerund_answer(clause)):
        return answer
    return _subjectless_past(clause) or clause


def _gerund_answer(clause: str) -> str | None:
    """ "Mostly building pipelines in Python." answering "what do you work on?": the speaker is doing
    it, so "I'm mostly building pipelines in Python." (not when the gerund is the subject of a verb
    of its own: "Building pipelines is fun")."""
    tokens = clause.split()
    at = 0
    while at < len(tokens) - 1 and grammar.is_adverb(tokens[at]):
        at += 1
    head = tokens[at].lower() if tokens else ""
    if not head.endswith("ing") or not grammar.is_verb(head) or _FINITE.search(" ".join(tokens[at + 1 :])):
        return None
    if grammar.lemma(head) == head:
        return None  # "Spring Boot 3 on Java 21": a word that ends in "ing", no gerund
    return "I'm " + clause[:1].lower() + clause[1:]


def _subjectless_past(clause: str) -> str | None:
    """ "Moved to Cardiff in March.", "Got bumped up to senior analyst.": the speaker leaves out
    the "I" of what they did; "I moved to Cardiff in March." (not "Got it.", not "Tired of Java")."""
    tokens = clause.split()
    at = 0
    while at < len(tokens) - 1 and grammar.is_adverb(tokens[at]):
        at += 1
    head = tokens[at].lower().strip(",") if tokens else ""
    if (
        len(tokens) - at < 3
        or not grammar.is_past(head)
        or cues.PRONOUN_OBJECT.match(" ".join(tokens[at + 1 :]))
    ):
        return None
    if "ADJ" in grammar.tags(head) and tokens[at + 1].lower() not in _OBJECT_START:
        return None  # "Tired of the commute": how they feel, not what they did
    return "I " + clause[:1].lower() + clause[1:]
