"""The turns said just before and after a turn: written at ingest, read by search (``stages.neighbours``).

A conversation's evidence is often two or three turns in a row: a question
and its answer, a plan and the reply that names the date, the same speaker's
next turn after the other's short reply. A search that found one of them can
offer the others. So ingest records, in each turn's metadata under ``ADJACENT``
(a system key), the message ids of up to ``SPAN`` turns before and after it in
its session, nearest first: ``[before 1, after 1, before 2, after 2]``. Message
ids, not record ids: a turn's record id is derived from its tenant, user and
message id (``ingest.stm_memory_id``).

Within one add the order is the add's. Across adds (an agent sends one message
per request: the usual pattern) an add with a session reads the session's last
turns (``session_tail``: the user's last raw turns, newest first, one small
indexed read) and links its first turns to them; the ones before it gain the
new turns as their turns after (``relink``: a metadata mark). The same turns
are the new turns' indexing context (``Tail.messages``, the turns before each
that BM25 indexes with it). Per-turn adds thus record and index what one add
of the whole session would. A store knows no order
among the turns of one add (they share their ``created_at``, and their ids are
hashes), so each turn also records its place in its add (``ADJACENT_AT``).
Without a session nothing links across adds: there is no conversation to follow.
Two adds to one session at the same moment may both link to the same last
turn, and the later mark wins: an agent's turns of one session arrive in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstack.models import MemoryFilters, MemoryRecord, Message, Role, Tier
from memstack.ports.store import MemoryStore

#: the metadata key (``models.SYSTEM_METADATA_KEYS``)
ADJACENT = "adjacent"

#: the turn's place in its add (``models.SYSTEM_METADATA_KEYS``): orders the turns of one add
ADJACENT_AT = "adjacent_at"

#: turns recorded on each side
SPAN = 2

#: the user's turn records read before a session none of them belong to counts as new, and at most
#: in all: a long turn is many records (its chunks and passages), and a session's tail is never
#: worth more than a few small reads. Pages start small (the session's last turns are usually the
#: user's newest records) and double.
_WINDOW = 64
_MOST = 512
_FIRST_PAGE = 8


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


@dataclass
class Tail:
    """The last turns of a session before an add: message ids oldest first (at most ``2 * SPAN``),
    and each one's records (the turn's, its chunks', its passages': each records the turns around)."""

    message_ids: list[str] = field(default_factory=list)
    records: dict[str, list[MemoryRecord]] = field(default_factory=dict)

    def messages(self) -> list[Message]:
        """The turns as indexing reads them for context (``indexing.index_turns``): a turn in
        chunks by its first chunk only, as within one add."""
        out = []
        for message_id in self.message_ids:
            head = next(
                (
                    r
                    for r in self.records[message_id]
                    if "passage" not in r.metadata and not r.metadata.get("chunk")
                ),
                None,
            )
            if head is not None and head.content:
                role = Role.ASSISTANT if head.metadata.get("role") == Role.ASSISTANT else Role.USER
                out.append(Message(id=message_id, role=role, speaker=head.speaker, content=head.content))
        return out


def session_tail(
    store: MemoryStore,
    tenant: str,
    user_id: str,
    session_id: str,
    skip: set[str],
    span: int = SPAN,
    context: int = 0,
) -> Tail:
    """The session's last ``2 * span`` turns, or ``context`` if more (not those of ``skip``: the
    add's own, on a retry).

    Twice the span: the last ``span`` turns gain the new ones as their turns after, and
    their turns before are then all among those read. ``context``: the turns indexing
    gives each new turn as its context (``IndexingConfig.context_turns``). The user's raw turns are listed
    newest first (an indexed, bounded read on every backend; a listing filtered by session
    would read the whole user to learn that a session is new). It stops once it is past
    (older than) ``2 * span`` of the session's turns, so every record of each is read, or
    after a page with none of the session's once ``_WINDOW`` records are read: a session none
    of the user's last ``_WINDOW`` turn records belong to is a new conversation (or one
    resumed after others).
    """
    filters = MemoryFilters(tier=Tier.STM)
    want = max(2 * span, context)
    seen: dict[str, tuple[datetime, int]] = {}  # message id -> (created_at, place in its add)
    records: dict[str, list[MemoryRecord]] = {}
    cursor: str | None = None
    read, size = 0, _FIRST_PAGE
    while read < _MOST:
        page, cursor = store.list(tenant, user_id, filters, size, cursor, order="created_at")
        read, size = read + len(page), min(2 * size, _WINDOW)
        mine = [r for r in page if r.session_id == session_id]
        for record in mine:
            if len(seen) >= want and all(when > record.created_at for when, _ in seen.values()):
                return _tail(seen, records, want)
            message_id = record.source_ids[0] if record.source_ids else None
            if message_id is None or message_id in skip:
                continue
            at = record.metadata.get(ADJACENT_AT)
            seen.setdefault(message_id, (record.created_at, at if isinstance(at, int) else 0))
            records.setdefault(message_id, []).append(record)
        if not cursor or (not mine and read >= _WINDOW):
            break
    return _tail(seen, records, want)


def _tail(seen: dict[str, tuple[datetime, int]], records: dict[str, list[MemoryRecord]], want: int) -> Tail:
    # newest first: by when the add was, then by the place in it
    last = sorted(seen, key=seen.__getitem__, reverse=True)[:want][::-1]
    return Tail(message_ids=last, records={m: records[m] for m in last})


def relink(
    store: MemoryStore, tenant: str, user_id: str, tail: Tail, message_ids: Sequence[str], span: int = SPAN
) -> int:
    """Give the tail's last ``span`` turns the add's turns as their turns after; returns records changed."""
    sequence = [*tail.message_ids, *message_ids]
    changed = 0
    for at in range(max(0, len(tail.message_ids) - span), len(tail.message_ids)):
        around = adjacent_ids(sequence, at, span)
        stale = [r.id for r in tail.records[sequence[at]] if r.metadata.get(ADJACENT) != around]
        if stale:
            changed += store.mark(tenant, user_id, stale, **{ADJACENT: around})
    return changed
