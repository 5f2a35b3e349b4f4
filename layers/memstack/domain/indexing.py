"""What text a raw turn is indexed (BM25) and embedded (vector) with.

Kept in one place so ingestion, re-indexing and every backend agree.
"""

from __future__ import annotations

from memstack.models import Message


def turn_text(message: Message) -> str:
    """Who said it, and what."""
    return f"{message.speaker}: {message.content}" if message.speaker else message.content
