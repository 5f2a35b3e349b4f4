"""Ingestion stage 1: the immediate, durable save of every message.

A message is stored in the short-term store (the durable record) and indexed
as an STM memory (tier ``stm``) with its embeddings before ``add`` returns.
Extraction (stages 2-4) runs later from the job queue. Re-sending a message id
stores nothing twice: the STM append is conditional and the STM memory id is
derived from (tenant, user, message id).

The STM entry is also the extraction outbox: written "pending" (an
extraction is owed), made "done" by the extraction job. If anything fails
between the STM write and the enqueue (the queue, the index, the process),
the caller gets an error and retries; the retry finds the message already
stored, but still "pending", and enqueues it again. Extraction job ids are
derived from the stored entry, so a job sent twice is run once.

Where the STM and the store share no transaction (the AWS backends), an add
whose turn write fails takes back the entries it stored (``withdraw``), and
only those it still holds by its claim. A concurrent duplicate (the same
message ids) that found the entries already stored adopts them before it
answers yes, so the first add's take-back can no longer remove them; if the
take-back came first, the duplicate stores them again as its own.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from aws_lambda_powertools import Logger

from memstack.domain.adjacent import ADJACENT, ADJACENT_AT, Tail, adjacent_ids, relink, session_tail
from memstack.domain.chunks import chunk_message_id, passage_id, split_chunks
from memstack.domain.erasure import Fence
from memstack.domain.indexing import index_turns, turn_text
from memstack.domain.sections import IngestConfig
from memstack.domain.vectors import coarse_prefix
from memstack.errors import Conflict, DependencyFailed
from memstack.models import MemoryRecord, Message, Role, Scope, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.queue import Job, JobQueue
from memstack.ports.stm import ShortTermStore, StmEntry
from memstack.ports.store import MemoryStore

logger = Logger(service="memstack", child=True)

#: every raw turn's memory id starts with it; LTM ids (``models.new_id``) are uuid4 hex
_TURN_PREFIX = "stm_"


def stm_memory_id(tenant: str, user_id: str, message_id: str) -> str:
    digest = hashlib.blake2b(f"{tenant}\x1f{user_id}\x1f{message_id}".encode(), digest_size=12).hexdigest()
    return f"{_TURN_PREFIX}{digest}"


def turn_record_ids(store: MemoryStore, tenant: str, user_id: str, message_ids: list[str]) -> list[str]:
    """Every record the turns are indexed as: each turn's own, and a long turn's other chunks."""
    own = [stm_memory_id(tenant, user_id, m) for m in message_ids]
    found = store.get_many(tenant, user_id, own)
    ids = list(own)
    for message_id, record_id in zip(message_ids, own, strict=True):
        record = found.get(record_id)
        chunks = int(record.metadata.get("chunks", 1)) if record is not None else 1
        ids += [stm_memory_id(tenant, user_id, chunk_message_id(message_id, i)) for i in range(1, chunks)]
    return ids


def is_turn_id(memory_id: str) -> bool:
    """True for the id of a raw turn (tier ``stm``): LTM ids are uuid4 hex and never carry the prefix."""
    return memory_id.startswith(_TURN_PREFIX)


def extraction_job(
    tenant: str, user_id: str, message_id: str, received_at: datetime, metadata: dict[str, Any] | None = None
) -> Job:
    """The extraction job of one stored message: the same id however often it is (re-)enqueued.

    ``received_at`` is the stored entry's: the same message stored again after
    an erase is a new entry, so it gets a new job (never "already done").
    ``metadata`` (the caller's) is carried onto the memories extracted from it.
    """
    basis = f"{tenant}\x1f{user_id}\x1f{message_id}\x1f{received_at.timestamp():.6f}"
    digest = hashlib.blake2b(basis.encode(), digest_size=12).hexdigest()
    # Session and scope are read from the stored entry by the job.
    return Job(
        id=f"extract_{digest}",
        type="extract",
        tenant=tenant,
        user_id=user_id,
        payload={"message_id": message_id, **({"metadata": metadata} if metadata else {})},
    )


def with_passages(
    record: MemoryRecord, part: Message, embed_text: str, config: IngestConfig
) -> list[tuple[MemoryRecord, str]]:
    """A turn's record and the text to embed for it, then its passages' (``domain/chunks.py``), if long.

    ``part``: the message the record indexes (its chunk, for a long turn's chunk record).
    """
    limit = config.passage_chars
    wanted = config.passage_roles == "all" or part.role == Role.ASSISTANT
    if not limit or not wanted or len(record.content) <= limit:
        return [(record, embed_text)]
    pieces = split_chunks(record.content, limit)
    own = record.model_copy(update={"metadata": {**record.metadata, "passages": len(pieces)}})
    out = [(own, embed_text)]
    for i, piece in enumerate(pieces[1:], start=1):
        passage = record.model_copy(
            update={
                "id": passage_id(record.id, i),
                "content": piece,
                "search_text": "",  # found by its vector only: its words are the record's
                "metadata": {**record.metadata, "passage": i},
            }
        )
        out.append((passage, turn_text(part.model_copy(update={"content": piece}))))
    return out


#: how often an add stores again what concurrent failing duplicates keep taking back
_ADOPT_ATTEMPTS = 3

#: a unit of work: the adapters' writes inside it commit together or not at all (the embedded
#: STM and store share one SQLite file, so one transaction); ``None`` where no such unit exists
UnitOfWork = Callable[[], AbstractContextManager[object]]


@dataclass
class IngestResult:
    accepted: list[str]
    stored: list[str]
    queued: int
    #: ids of the extraction jobs this call sent (a sync caller waits for exactly these)
    job_ids: list[str] = field(default_factory=list)
    #: every message of the call is extracted (set when the caller waited: ``sync``)
    processed: bool = False


class Ingestor:
    def __init__(
        self,
        store: MemoryStore,
        stm: ShortTermStore,
        embedder: Embedder,
        config: IngestConfig,
        queue: JobQueue | None = None,
        unit: UnitOfWork | None = None,
    ) -> None:
        self.store = store
        self.stm = stm
        self.embedder = embedder
        self.config = config
        self.queue = queue
        self.unit: UnitOfWork = unit or nullcontext
        #: the STM and store writes of an add are one transaction (else a failure is compensated)
        self.transactional = unit is not None

    def add(
        self,
        tenant: str,
        user_id: str,
        messages: list[Message],
        *,
        session_id: str | None = None,
        scope: Scope = Scope.USER,
        infer: bool = True,
        metadata: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> IngestResult:
        now = now or datetime.now(UTC)
        return self._add(tenant, user_id, messages, session_id, scope, infer, metadata, now)

    def _add(
        self,
        tenant: str,
        user_id: str,
        messages: list[Message],
        session_id: str | None,
        scope: Scope,
        infer: bool,
        metadata: dict[str, Any] | None,
        now: datetime,
    ) -> IngestResult:
        # Before anything is written: one time outside the range refuses the whole request.
        times = [(f"messages[{i}].timestamp", m.timestamp) for i, m in enumerate(messages)]
        self.config.time_bounds.check(times)
        expires = int((now + timedelta(days=self.config.stm_ttl_days)).timestamp())
        stamped = [m if m.timestamp else m.model_copy(update={"timestamp": now}) for m in messages]
        owed = infer and self.queue is not None
        message_ids = [m.id for m in stamped]
        # The session's turns before this add: links and context across adds (domain/adjacent.py).
        tail = (
            session_tail(
                self.store,
                tenant,
                user_id,
                session_id,
                set(message_ids),
                context=self.config.indexing.context_turns,
            )
            if session_id is not None
            else Tail()
        )
        # Embed first: if the model fails nothing is half-written.
        turns = self._turn_records(tenant, user_id, session_id, scope, stamped, metadata, now, tail)
        vectors = self.embedder.embed([text for _, text in turns]) if turns else None
        entries = [
            StmEntry(
                tenant=tenant,
                user_id=user_id,
                session_id=session_id,
                scope=scope,
                message=m,
                received_at=now,
                expires_at=expires,
                extraction="pending" if owed else "none",
            )
            for m in stamped
        ]
        fence = Fence.at(now)  # an erase of the user while this runs refuses its writes
        claim = uuid.uuid4().hex  # what lets this add, and no other request, take its entries back
        with self.unit():  # the entries and their turns: stored together, or (a failure) neither
            stored = self.stm.append(entries, fence=fence, claim=claim)
            try:
                indexed = self._index_turns(tenant, user_id, turns, vectors, fence)
            except BaseException:
                if not self.transactional:  # no one transaction to roll back: take the entries back
                    self._withdraw(tenant, user_id, stored, claim)
                raise
            if indexed and tail.message_ids:  # in the same transaction where there is one
                self._relink(tenant, user_id, tail, message_ids)
        if not self.transactional:
            stored += self._adopt(entries, stored, fence, claim)
        jobs = self._enqueue(tenant, user_id, message_ids, stored, now, metadata) if owed else []
        return IngestResult(
            accepted=[m.id for m in stamped], stored=stored, queued=len(jobs), job_ids=[j.id for j in jobs]
        )

    def _relink(self, tenant: str, user_id: str, tail: Tail, message_ids: list[str]) -> None:
        """The session's last turns gain this add's as their turns after (``adjacent.relink``).

        After the add is stored, and never its failure: a link is a hint to search, the
        turns are the data. (A retry whose turns were all stored already links nothing:
        the session may have moved on since.)
        """
        try:
            relink(self.store, tenant, user_id, tail, message_ids)
        except Exception:
            logger.warning(
                "the turns before an add could not be linked to it", extra={"turns": len(tail.message_ids)}
            )

    def _adopt(self, entries: list[StmEntry], stored: list[str], fence: Fence, claim: str) -> list[str]:
        """Make entries another request stored this add's too, before it answers yes; the ids stored again.

        The request that stored them may still fail and take them back; adopted,
        they stay. One it took back first is stored again here, under this add's
        claim (its turn is indexed: this add just did it).
        """
        mine = set(stored)
        others = [e for e in entries if e.message.id not in mine]
        again: list[str] = []
        for _ in range(_ADOPT_ATTEMPTS):
            if not others:
                return again
            tenant, user_id = others[0].tenant, others[0].user_id
            missing = set(self.stm.adopt(tenant, user_id, [e.message.id for e in others]))
            lost = [e for e in others if e.message.id in missing]
            new = self.stm.append(lost, fence=fence, claim=claim) if lost else []
            again += new
            others = [e for e in lost if e.message.id not in set(new)]  # stored meanwhile by yet another
        if not others:
            return again
        raise DependencyFailed("concurrent requests with the same message ids kept failing; retry shortly")

    def _withdraw(self, tenant: str, user_id: str, stored: list[str], claim: str) -> None:
        """Take back the STM entries this add stored, because its turns could not be indexed.

        The store's own write is all or nothing, so after this nothing of the
        add is left. Entries a concurrent duplicate adopted meanwhile stay (it
        answered yes on them). If the take-back fails too (the same outage), the
        entries stay "pending" with this add's claim: the client got a 503, and its
        retry finds them stored, indexes their turns, adopts them and enqueues their
        extraction; without a retry the outbox sweep still extracts them.
        """
        if not stored:
            return
        try:
            self.stm.withdraw(tenant, user_id, stored, claim)
        except Exception:  # the original failure is the one to report
            logger.warning(
                "an add failed and its STM entries could not be taken back", extra={"entries": len(stored)}
            )

    def _turn_records(
        self,
        tenant: str,
        user_id: str,
        session_id: str | None,
        scope: Scope,
        stamped: list[Message],
        metadata: dict[str, Any] | None,
        now: datetime,
        tail: Tail,
    ) -> list[tuple[MemoryRecord, str]]:
        """Each message's STM memory records (tier ``stm``, no vectors yet) and the text to embed for each.

        ``tail``: the session's turns before this add: their neighbours and context.

        A short message is one record; a long one is one record per chunk (``domain/chunks.py``),
        the first under the message's own id. A long turn is context for the next ones by its
        first chunk only.
        """
        limit = self.config.chunk_chars
        pieces = [split_chunks(m.content, limit) for m in stamped]
        heads = [
            m if len(p) == 1 else m.model_copy(update={"content": p[0]})
            for m, p in zip(stamped, pieces, strict=True)
        ]
        context = tail.messages()
        indexed = index_turns([*context, *heads], self.config.indexing)[len(context) :]
        before = tail.message_ids
        sequence = [*before, *(m.id for m in stamped)]
        out = []
        for at, (m, chunks, head) in enumerate(zip(stamped, pieces, indexed, strict=True)):
            # the turns around it in its session, for search's neighbour turns (domain/adjacent.py)
            around = adjacent_ids(sequence, len(before) + at)
            for i, chunk in enumerate(chunks):
                part = m if len(chunks) == 1 else m.model_copy(update={"content": chunk})
                text = head if i == 0 else index_turns([part], self.config.indexing)[0]
                system: dict[str, Any] = {"role": str(m.role), ADJACENT_AT: at}
                if around:
                    system[ADJACENT] = around
                if len(chunks) > 1:
                    system.update(chunk=i, chunks=len(chunks))
                record = MemoryRecord(
                    id=stm_memory_id(tenant, user_id, chunk_message_id(m.id, i)),
                    tenant=tenant,
                    user_id=user_id,
                    session_id=session_id,
                    scope=scope,
                    tier=Tier.STM,
                    content=chunk,
                    search_text=text.search_text,
                    speaker=m.speaker,
                    event_time=m.timestamp,
                    created_at=now,
                    source_ids=[m.id],
                    metadata={**(metadata or {}), **system},
                )
                out += with_passages(record, part, text.embed_text, self.config)
        return out

    def _index_turns(
        self,
        tenant: str,
        user_id: str,
        turns: list[tuple[MemoryRecord, str]],
        vectors: Any,
        fence: Fence,
    ) -> int:
        """Index each message's STM memory records, unless they are stored already; how many were new."""
        existing = self.store.get_many(tenant, user_id, [r.id for r, _ in turns])
        records = []
        for (record, _), vector in zip(turns, vectors if vectors is not None else [], strict=True):
            if record.id in existing:
                continue
            vec = np.asarray(vector, dtype=np.float32)
            records.append(
                record.model_copy(
                    update={
                        "embedding_full": vec.tolist(),
                        "embedding_coarse": coarse_prefix(vec, self.config.coarse_dim).tolist(),
                    }
                )
            )
        self._put_missing(tenant, user_id, records, fence)
        return len(records)

    def _put_missing(self, tenant: str, user_id: str, records: list[MemoryRecord], fence: Fence) -> None:
        """Index the turns; one that meanwhile exists (a write that timed out but landed) is done already."""
        try:
            self.store.put(records, fence=fence)
        except Conflict:
            # An OpenSearch create can time out after it succeeded, or a concurrent retry won:
            # the ids are derived from the message, so what exists is this very turn.
            there = self.store.get_many(tenant, user_id, [r.id for r in records])
            self.store.put([r for r in records if r.id not in there], fence=fence)

    def _enqueue(
        self,
        tenant: str,
        user_id: str,
        message_ids: list[str],
        stored: list[str],
        now: datetime,
        metadata: dict[str, Any] | None,
    ) -> list[Job]:
        """Send the extraction jobs owed: the new messages', and a retried request's still-pending ones."""
        assert self.queue is not None
        owed = dict.fromkeys(stored, now)
        resent = [mid for mid in message_ids if mid not in owed]
        if resent:
            owed.update(self.stm.unextracted(tenant, user_id, resent))
        jobs = [extraction_job(tenant, user_id, mid, received, metadata) for mid, received in owed.items()]
        if jobs:
            self.queue.send(jobs)
        return jobs

    def wait_for_extraction(
        self, tenant: str, user_id: str, result: IngestResult, timeout: float | None, poll: float = 0.2
    ) -> bool:
        """Wait until every message of ``result`` is extracted; False when ``timeout`` (None: none) passes.

        A local queue runs the jobs right here; with SQS the workers run them and
        this only watches the outbox. A job that dead-letters ends the wait too.
        """
        if self.queue is None or not result.job_ids:
            return not result.job_ids
        deadline = time.monotonic() + (math.inf if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            finished = self.queue.drain(
                timeout=None if left == math.inf else max(0.0, left), job_ids=result.job_ids
            )
            if not self.stm.unextracted(tenant, user_id, result.accepted):
                return True
            if finished or time.monotonic() >= deadline:
                return False  # run and dead-lettered, or out of time: still owed
            time.sleep(poll)
