"""Retrieval stage 1: what a query asks about time and about history.

Temporal intent comes with a reference window when the query names a time
("last weekend", "in May 2023"); a bare "when ..." question has temporal
intent but no window, so stage 5 leaves its ranking alone. History intent
("used to", "previously", "has X changed") makes stage 8 return superseded
versions of the memories found. A question about the present ("what is my
Redis maxmemory", "what score did I get most recently") has *current* intent:
stage 8 then ranks a newer statement of the same thing above an older one. A
question that asks for several things ("what books has she read", "how many
fields did I add", "summarise…", "in what order…") has *several* intent: its
answer is spread over turns that share its topic but not its words, and stage
3b (dense feedback) searches again around what the first results are about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstack.domain.time.windows import TimeWindow, resolve_window

_WHEN = re.compile(r"\b(?:when|what (?:day|date|month|year|time)|how long ago|since when)\b", re.I)

_HISTORY = [
    re.compile(p, re.I)
    for p in (
        r"\bused to\b",
        r"\bpreviously\b",
        r"\bformerly\b",
        r"\boriginally\b",
        r"\bat first\b",
        r"\bin the beginning\b",
        r"\bno longer\b",
        r"\banymore\b",
        r"\bany more\b",
        r"\bearlier version\b",
        r"\bhistory of\b",
        r"\b(?:has|have|had|did)\b[\w\s'-]{0,60}\bchanged?\b",
        r"\bchanged?\b[\w\s'-]{0,30}\b(?:mind|over time|since)\b",
        r"\bbefore (?:that|this|now|then)\b",
        r"\bbefore\s*\?*\s*$",
        r"\bwhat did (?:i|you|we|he|she|they) (?:say|tell|mention)\b",
    )
]

# What makes a question ask about what is true now: a present-tense lead verb ("what is",
# "how many ... have I", "what does she eat") or a word that asks for the latest ("currently",
# "most recently", "so far"), and no history cue. A question in the past tense ("when did",
# "what was") asks about one moment, not about what holds now: left alone.
_LATEST = re.compile(
    r"\b(?:current(?:ly)?|now|nowadays|these days|latest|newest|most recent(?:ly)?|so far|"
    r"still|at the moment|up to date)\b",
    re.I,
)
_PRESENT_VERB = re.compile(
    r"\b(?:is|are|am|isn't|aren't|do|does|don't|doesn't|has|have|can|should)\b|'s\b", re.I
)
_PAST_VERB = re.compile(r"\b(?:did|was|were|had|didn't|wasn't|weren't)\b", re.I)


_AUX = r"(?:has|have|had|does|do|did|is|are|was|were|can|could|would|will|should)"
# What makes a question ask for several things: a count, a plural noun asked for ("what books
# has", "which cities has", "what kinds of"), a list or summary, several named together, an order.
_SEVERAL = [
    re.compile(p, re.I)
    for p in (
        r"\bhow many\b",
        r"\b(?:what|which)\s+(?:kinds|types|sorts)\s+of\b",
        rf"\b(?:what|which)\s+(?:[\w+/-]+\s+){{0,2}}[\w+/-]*[a-z]{{2}}s\s+{_AUX}\b",
        r"\bwhat ways\b",
        r"\bwhat (?:are|were) (?:some|all|the (?:\w+\s+){0,2}\w+s)\b",
        r"\b(?:list|name|summar(?:y|ise|ize)|recap)\b",
        r"\b(?:both|each|every|all the|all of)\b",
        r"\b(?:in (?:what|which) order|order in which|across (?:my|our|the|all))\b",
    )
]


def asks_several(text: str) -> str | None:
    """The words that make a question ask for several things (module docstring), or None."""
    for pattern in _SEVERAL:
        m = pattern.search(text)
        if m:
            return m.group(0)
    return None


def asks_current(text: str) -> bool:
    """Whether a question (without a history cue) asks what holds now (module docstring).

    The first of a present-tense and a past-tense auxiliary decides ("what is the
    limit I set" is present, "when did I set it" past); a latest-word makes it present.
    """
    if _LATEST.search(text):
        return True
    present, past = _PRESENT_VERB.search(text), _PAST_VERB.search(text)
    if present is None:
        return False
    return past is None or present.start() < past.start()


@dataclass(frozen=True)
class QueryAnalysis:
    text: str
    reference_time: datetime
    temporal_intent: bool
    window: TimeWindow | None
    history_intent: bool
    cues: list[str] = field(default_factory=list)
    #: the question asks what holds now (no history cue; ``asks_current``)
    current_intent: bool = False
    #: the question asks for several things (a count, a list, a plural; ``asks_several``)
    several_intent: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference_time": self.reference_time.isoformat(),
            "temporal_intent": self.temporal_intent,
            "window": self.window.as_dict() if self.window else None,
            "history_intent": self.history_intent,
            "current_intent": self.current_intent,
            "several_intent": self.several_intent,
            "cues": self.cues,
        }


def analyse_query(text: str, reference_time: datetime) -> QueryAnalysis:
    cues: list[str] = []
    window = resolve_window(text, reference_time)
    if window is not None:
        cues.append(f"time: {window.phrase}")
    when = _WHEN.search(text)
    if when:
        cues.append(f"time question: {when.group(0)}")
    history = False
    for pattern in _HISTORY:
        m = pattern.search(text)
        if m:
            history = True
            cues.append(f"history: {m.group(0).strip()}")
            break
    current = not history and asks_current(text)
    if current:
        cues.append("current")
    several = asks_several(text)
    if several is not None:
        cues.append(f"several: {several.strip()}")
    return QueryAnalysis(
        text=text,
        reference_time=reference_time,
        temporal_intent=window is not None or when is not None,
        window=window,
        history_intent=history,
        cues=cues,
        current_intent=current,
        several_intent=several is not None,
    )
