"""The turns said just before and after a turn: written at ingest, read by search (``stages.neighbours``).

A conversation's evidence is often two or three turns in a row: a question
and its answer, a plan and the reply that names the date, the same speaker's
next turn after the other's short reply. A search that found one of them can
offer the others, but a store knows no order among the turns of one add (they
share their ``created_at``, and their ids are hashes). So ingest records, in
each turn's metadata under ``ADJACENT`` (a system key), the message ids of up to
``SPAN`` turns before and after it in the same add, nearest first: ``[before 1,
after 1, before 2, after 2]``. Message ids, not record ids: a turn's record id
is derived from its tenant, user and message id (``ingest.stm_memory_id``).
Only turns of one add are linked: an agent that sends one message per request
gives none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: the metadata key (``models.SYSTEM_METADATA_KEYS``)
ADJACENT = "adjacent"

#: turns recorded on each side
SPAN = 2


def adjacent_ids(message_ids: Sequence[str], at: int, span: int = SPAN) -> list[str]:
    """The ids around ``message_ids[at]``, nearest first, the one before ahead of the one after."""
    out = []
    for distance in range(1, span + 1):
        for j in (at - distance, at + distance):
            if 0 <= j < len(message_ids):
                out.append(message_ids[j])
    return out


def recorded(metadata: dict[str, Any], span: int) -> list[str]:
    """The message ids a turn's metadata records within ``span`` turns of it, nearest first."""
    ids = metadata.get(ADJACENT)
    if not isinstance(ids, list):
        return []
    return [i for i in ids[: 2 * span] if isinstance(i, str)]
