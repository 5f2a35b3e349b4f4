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

import re

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
