"""What text a raw turn is indexed (BM25) and embedded (vector) with.

Kept in one place so ingestion, re-indexing and every backend agree.

A reply is often meaningless alone ("Yes, every Sunday!"): its subject is in
the turn it answers. So a turn can carry the turns before it in the same
batch as context, and the date it was said on, in its BM25 text and,
optionally, in the text that is embedded. The record's ``content`` is never
changed: context only affects what finds it.

Context adapts to the conversation: a turn longer than ``context_max_chars``
is never context. A short reply needs its subject, but a long turn (a
3,700-character assistant answer before a user's next question, a pasted
log) carries its own, and its words would outweigh the turn's in BM25: in
long user–assistant chats a user turn then gets no context while the
assistant's reply still gets the short question it answers.

Context adapts to the speaker's role too: an assistant's reply is not in the
BM25 index by default (``assistant_text``). It restates the user's words and
adds thousands of its own, so in a user–assistant chat it outranked the
user's turn on the user's own words; it is found by its embedding, and a
short reply is still context for the user's next turn (docs/retrieval.md,
"Role-based indexing").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstack.domain.sections import IndexingConfig
from memstack.models import Message, Role


@dataclass(frozen=True)
class IndexedTurn:
    search_text: str
    embed_text: str


def turn_text(message: Message) -> str:
    """Who said it, and what."""
    return f"{message.speaker}: {message.content}" if message.speaker else message.content


def _date_text(message: Message) -> str:
    if message.timestamp is None:
        return ""
    ts = message.timestamp
    return f"{ts.day} {ts.strftime('%B %Y')}"


def _short(turns: Sequence[Message], limit: int) -> list[str]:
    """The contents of ``turns`` (nearest first) up to the first one longer than ``limit``."""
    out = []
    for m in turns:
        if limit and len(m.content) > limit:
            break
        out.append(m.content)
    return out


def index_turns(messages: Sequence[Message], config: IndexingConfig) -> list[IndexedTurn]:
    """The indexed and embedded text of each message, in order."""
    out = []
    limit = config.context_max_chars
    for pos, message in enumerate(messages):
        own = turn_text(message)
        if message.role == Role.ASSISTANT and not config.assistant_text:
            # No words at all (not even the date, which would make every reply match a date query).
            out.append(IndexedTurn(search_text="", embed_text=own))
            continue
        # Context lines carry the words, not the speaker names: repeating a name
        # in every following turn would make it outscore the turn that said it.
        # Nearest first, so a long turn cuts off everything beyond it too.
        before = messages[max(0, pos - config.context_turns) : pos]
        context = _short(before[::-1], limit)[::-1]
        after = _short(messages[pos + 1 : pos + 1 + config.context_after], limit)
        with_context = "\n".join([*context, own])
        search = "\n".join([with_context, *after])
        if config.date_in_text and (date := _date_text(message)):
            search = f"{search}\n({date})"
        out.append(
            IndexedTurn(search_text=search, embed_text=with_context if config.context_in_embedding else own)
        )
    return out
