"""What one message's extraction shares, and how its decisions resolve.

A message is read sentence by sentence and clause by clause (``clauses``, ``statements``); each
clause may make a decision (``decisions``). ``Turn`` carries what they share: the message, who
"I" and "you" are, the speaker's memories, what was said before, and the decisions so far.
``resolve`` keeps one decision per memory, the most specific.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from memstack.adapters.llm.rules.sentences import split_sentences
from memstack.domain.categories import Lexicon, lexicon_for
from memstack.models import Kind, MemoryRecord, Message
from memstack.ports.embedder import Embedder
from memstack.ports.llm import ExtractionOp, OpName

# A change links to the memory closest in meaning when no word links them (``decisions.closest_in_meaning``):
# at the default embedder's cosine 0.6 (pairs that are not a change reached 0.53 in our checks), or 0.1
# less when the keyword categories of both agree, two weak signals pointing the same way.
LINK_SIMILARITY = 0.6

# How far back "she", "him", "there" reach: the speaker's last few sentences, this message's and their
# last turns'. A person or place named longer ago is no longer what the pronoun means ("My sister
# lives in Porto." and four sentences about work later, "She ..." is someone else, or unclear).
PRONOUN_REACH = 4

# How specific a decision is: when two of one message touch the same memory, the lower number wins.
ATTRIBUTE, CORRECTION, COMPLETION, CHANGE, ENDING, ADD = range(6)


@dataclass
class Decision:
    op: ExtractionOp
    rank: int


@dataclass
class Turn:
    """What every sentence of one message shares."""

    message: Message
    subject: str
    listener: str | None
    neighbours: list[MemoryRecord]
    #: the tenant's categories, which memories are filed under (the built-in lexicon still judges topics)
    lexicon: Lexicon = field(default_factory=lexicon_for)
    #: "we" is the speaker's family: a chat between people, not with an assistant
    household: bool = True
    #: the message answers a question put to the speaker ("What do you work on?")
    asked: bool = False
    #: what was said before, newest first: this message's earlier sentences, then the earlier turns
    before: list[str] = field(default_factory=list)
    #: the same, of the speaker's own words only (this message's earlier sentences, their last turns)
    own_before: list[str] = field(default_factory=list)
    #: the sentence is one clause: only a whole sentence may join the memory before it as what says
    #: more about it ("To address this, I ..." leaves "To address this" behind, which says nothing)
    whole_sentence: bool = True
    #: the sentence's clauses before this one, newest first: "It's Seattle, I'm stoked for my game there"
    clauses_before: list[str] = field(default_factory=list)
    #: the person an opening "she"/"he" of this sentence was read as ("Sam" in "He kept the flat"):
    #: what the speaker says of their people is kept like what they say of themselves
    mentioned: str | None = None
    decisions: list[Decision] = field(default_factory=list)
    #: the decision the clause just before made, which an elaboration joins
    last: Decision | None = None
    #: when words link a change to no memory, the memory closest in meaning, if this close
    embedder: Embedder | None = None
    link_similarity: float = LINK_SIMILARITY

    def recent(self, *, anyone: bool = False) -> list[str]:
        """The speaker's last ``PRONOUN_REACH`` sentences (``anyone``: said by anyone), newest first:
        where a pronoun's person, place or thing is looked up."""
        out: list[str] = []
        for text in self.before if anyone else self.own_before:
            out.extend(reversed(split_sentences(text)))
            if len(out) >= PRONOUN_REACH:
                break
        return out[:PRONOUN_REACH]

    @property
    def sources(self) -> list[str]:
        return [self.message.id]

    def taken(self) -> frozenset[str]:
        return frozenset(d.op.target_id for d in self.decisions if d.op.target_id)


@dataclass(frozen=True)
class Said:
    """One clause, rewritten: the memory text and what it is."""

    original: str
    text: str
    kind: Kind
    category: str | None
    event_time: datetime | None


def op(
    kind: OpName, turn: Turn, *, target: MemoryRecord | None = None, said: Said | None = None
) -> ExtractionOp:
    return ExtractionOp(
        op=kind,
        target_id=target.id if target else None,
        content=said.text if said else None,
        kind=said.kind if said else Kind.FACT,
        category=said.category if said else None,
        event_time=said.event_time if said else None,
        source_ids=turn.sources,
    )


def resolve(decisions: list[Decision]) -> list[ExtractionOp]:
    """One decision per memory: the most specific; a replaced ending is kept as its own event."""
    best: dict[str, Decision] = {}
    for d in decisions:
        target = d.op.target_id
        if target and (target not in best or d.rank < best[target].rank):
            best[target] = d
    out: list[ExtractionOp] = []
    for d in decisions:
        target = d.op.target_id
        if not target or best[target] is d:
            out.append(d.op)
        elif d.op.op == "UPDATE" and d.op.content:
            out.append(d.op.model_copy(update={"op": "ADD", "target_id": None}))
    return out
