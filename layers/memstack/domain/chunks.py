"""Long turns are indexed in chunks: each chunk its own searchable record that cites the turn.

A pasted log, a file of code or a runaway assistant reply can be hundreds of
thousands of characters. Indexed as one record it would be one vector for a
text the embedder reads only the start of (MiniLM: 256 tokens), one BM25
document whose length drowns every term in it, and one item over DynamoDB's
400 KB limit. So a turn longer than ``chunk_chars`` is indexed as consecutive
chunks of at most that many characters, cut where the text breaks (a blank
line, else a line end, else a sentence end, else a space): chunk 0 is the
turn's own record (``stm_memory_id``), chunk ``i`` has an id derived from the
message id and ``i``, and every chunk's ``source_ids`` is the turn's message,
so a hit on any chunk cites the turn. The whole message stays in the
short-term store, the durable record.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from itertools import repeat

from memstack.domain.filter_expr import META, Cond, Not

#: where a chunk may end, best first: a blank line, a line end, a sentence end, a space
_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"[.!?](?=\s)"), re.compile(r"\s"))


def _cut(text: str, start: int, limit: int) -> int:
    """The end of the chunk starting at ``start``: the last break in its second half, else ``limit``."""
    end = start + limit
    if end >= len(text):
        return len(text)
    window = text[start:end]
    for pattern in _BREAKS:
        ends = [m.end() for m in pattern.finditer(window, len(window) // 2)]
        if ends:
            return start + ends[-1]
    return end


def split_chunks(text: str, limit: int) -> list[str]:
    """``text`` in consecutive pieces of at most ``limit`` characters that join back to it exactly."""
    if len(text) <= limit:
        return [text]
    pieces, start = [], 0
    while start < len(text):
        end = _cut(text, start, limit)
        pieces.append(text[start:end])
        start = end
    return pieces


def chunk_message_id(message_id: str, index: int) -> str:
    """The id chunk ``index`` of a message is indexed under (chunk 0 is the message's own)."""
    return message_id if index == 0 else f"{message_id}\x1fchunk{index}"


# Passages: the rest of a long turn, findable by its embedding.
#
# The embedder reads only the start of what it embeds (MiniLM: 256 tokens, about
# 1,000 characters of prose), so a record's vector says nothing of the rest of a
# 3,700-character reply. A record longer than ``passage_chars`` therefore gets
# one extra, vector-only record per further passage (cut at the same breaks):
# no BM25 text, the record's own fields (session, scope, time, metadata) so every
# filter treats it as the record, ``source_ids`` the turn's message, and an id
# derived from the record's own, so the vector stage maps a passage hit back to
# its record without a read (``passage_owner``) and a search returns the turn once,
# at its best passage's cosine.

#: between a record's id and its passage number: stm ids are "stm_" and hex, never a "~"
_PASSAGE_MARK = "~p"


def passage_id(record_id: str, index: int) -> str:
    """The id passage ``index`` (from 1; 0 is the record's own vector) of a record is stored under."""
    return f"{record_id}{_PASSAGE_MARK}{index}"


def passage_owner(memory_id: str) -> str:
    """The record a passage belongs to (the id itself for any other record)."""
    at = memory_id.find(_PASSAGE_MARK)
    return memory_id if at < 0 else memory_id[:at]


def is_passage_id(memory_id: str) -> bool:
    return _PASSAGE_MARK in memory_id


def any_passage_id(ids: Iterable[str]) -> bool:
    """Whether any of ``ids`` is a passage's (``is_passage_id``), tested in C: no Python call per id
    (the vector stage asks it of its few hundred hits on every search)."""
    return any(map(operator.contains, ids, repeat(_PASSAGE_MARK)))


#: a filter expression that keeps every record but passages (a listing of turns, not of their parts)
NOT_PASSAGE = Not(Cond(f"{META}passage", "gte", 1))
