"""One consolidation job: a user's unconsolidated STM turns become LTM (Memoria's consolidation).

The phases, each safe to repeat:

1. **read** the user's unconsolidated, unexpired STM entries;
2. **resume**: entries already covered by a summary record (an LTM record with
   ``metadata.consolidation == "summary"`` whose ``source_ids`` name them) were
   summarised by an earlier, interrupted run; they are not summarised again;
3. **summarise** every remaining group (grouping.py) and write the summary as
   an ``ADD`` through the extraction write path (``apply_operations``), unless a
   current LTM memory already says the same (``NONE``);
4. **synthesise** the summaries not yet synthesised with the related LTM they
   sit near: a cluster with an earlier synthesis record ``UPDATE``s it (unless
   its ``source_ids`` already cover every source: ``NONE``), otherwise ``ADD``;
5. **mark** the summaries synthesised, the tier-stm memory records
   ``consolidated`` (retrieval down-weights them), and last the STM entries
   themselves, so a run killed anywhere before the end finds its work again.

Every written record's ``source_ids`` lists every message it came from.

Bedrock batch inference (Memoria's cost advice for large runs) fits at phase
3: the groups and their texts are known before any model call, so a batch
summariser can submit them all as one ``CreateModelInvocationJob`` and the job
re-runs when the output lands; phase 2 then finds nothing new to redo.
"""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memstack.domain.categories import categorise
from memstack.domain.consolidation.grouping import Group, classify, group_entries
from memstack.domain.consolidation.similarity import RunEmbedder, clusters, nearest_ltm
from memstack.domain.consolidation.status import BUSY
from memstack.domain.erasure import Fence
from memstack.domain.heartbeat import LeaseKeeper
from memstack.domain.indexing import turn_text
from memstack.domain.ingest import turn_record_ids
from memstack.domain.sections import ConsolidationConfig
from memstack.domain.tenant import rules
from memstack.domain.tenant.config import TenantConfig
from memstack.models import SUMMARY, SYNTHESIS, Kind, MemoryRecord, Role, Scope, Tier, new_id
from memstack.ports.embedder import Embedder
from memstack.ports.lease import Leases
from memstack.ports.llm import ExtractionOp, Summariser
from memstack.ports.stm import ShortTermStore, StmEntry
from memstack.ports.store import MemoryStore

LEASE = "consolidation"
ApplyOperations = Callable[..., builtins.list[MemoryRecord]]


@dataclass
class ConsolidationReport:
    tenant: str
    user_id: str
    status: str = "done"
    read: int = 0
    resumed: int = 0
    groups: int = 0
    written: int = 0
    updated: int = 0
    unchanged: int = 0
    marked: int = 0
    summaries: int = 0
    syntheses: int = 0
    #: turns extraction already turned into current LTM: consolidation adds nothing for them
    known: int = 0
    #: assistant/system/tool turns: consolidated (marked) but never summarised as the user's memory
    skipped: int = 0
    #: the job stopped at ``max_entries``; the scheduler's next pass (or another run) takes the rest
    more_pending: bool = False
    memory_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _default_apply() -> ApplyOperations:
    from memstack.domain.extraction.apply import apply_operations

    return apply_operations


class Consolidator:
    def __init__(
        self,
        store: MemoryStore,
        stm: ShortTermStore,
        embedder: Embedder,
        summariser: Summariser,
        config: ConsolidationConfig,
        apply: ApplyOperations | None = None,
        leases: Leases | None = None,
        fence: Fence | None = None,
        configs: Callable[[str], TenantConfig] | None = None,
    ) -> None:
        #: when this run began: the store refuses its writes if the user is erased meanwhile
        self.fence = fence
        #: a tenant's configuration: what it writes is filed and held back as extraction's is
        self.configs = configs or (lambda _tenant: TenantConfig())
        self.store = store
        self.stm = stm
        self.embedder = embedder
        self.summariser = summariser
        self.config = config
        self._apply = apply
        self.leases = leases
        self._heartbeat = LeaseKeeper(config.lease_seconds / 3, name="memstack-consolidation-lease")
        #: who hears of the memories a run wrote (tenant, the versions): webhook events
        self.on_written: Callable[[str, list[MemoryRecord]], None] | None = None

    @property
    def apply(self) -> ApplyOperations:
        if self._apply is None:
            self._apply = _default_apply()
        return self._apply

    # ------------------------------------------------------------------- the job
    def run(
        self, tenant: str, user_id: str, now: datetime | None = None, *, fence: Fence | None = None
    ) -> ConsolidationReport:
        """Consolidate the user now, unless another run of the user holds its lease (status "busy").

        Two runs of one user at once (the API, the scheduler, the CLI) each read
        the same unconsolidated turns and would each write their summaries; the
        lease lets one run, and the other answers "busy" having written nothing.
        """
        # One job object per run (thread-safe), embedding each new text once however often it is compared.
        # The run's fence: its writes are refused if the user is erased meanwhile (domain/erasure.py).
        job = Consolidator(
            self.store,
            self.stm,
            RunEmbedder(self.embedder),
            self.summariser,
            self.config,
            self.apply,
            fence=fence or Fence.at(datetime.now(UTC)),
            configs=self.configs,
        )
        job.on_written = self.on_written
        return self._leased(job, tenant, user_id, now)

    def _leased(
        self, job: Consolidator, tenant: str, user_id: str, now: datetime | None
    ) -> ConsolidationReport:
        if self.leases is None:
            return job._run(tenant, user_id, now or datetime.now(UTC))
        leases, owner, seconds = self.leases, new_id(), self.config.lease_seconds
        if not leases.acquire(tenant, user_id, LEASE, owner, seconds):
            return ConsolidationReport(tenant=tenant, user_id=user_id, status=BUSY)
        try:
            with self._heartbeat.keep(lambda: leases.renew(tenant, user_id, LEASE, owner, seconds)):
                return job._run(tenant, user_id, now or datetime.now(UTC))
        finally:
            leases.release(tenant, user_id, LEASE, owner)

    def _run(self, tenant: str, user_id: str, now: datetime) -> ConsolidationReport:
        report = ConsolidationReport(tenant=tenant, user_id=user_id)
        pending = self.stm.unconsolidated(tenant, user_id, now, limit=self.config.max_entries)
        report.read = len(pending)
        report.more_pending = len(pending) >= self.config.max_entries
        if not pending:
            report.status = "nothing_to_do"
            return report
        covering, labels, known = self._provenance(tenant, user_id, pending)
        uncovered = [e for e in pending if e.message.id not in covering]
        report.resumed = len(pending) - len(uncovered)
        into: dict[str, str] = {mid: rec.id for mid, rec in covering.items()}
        # Never duplicate what is known: a turn that extraction already made into
        # a current LTM memory is consolidated into that memory, not summarised
        # again (a summary of it would restate the fact, and a stale turn would
        # bring back what a later turn replaced). The assistant's own turns are
        # not memories of the user.
        to_summarise = []
        for e in uncovered:
            if e.message.id in known:
                into[e.message.id] = known[e.message.id].id
                report.known += 1
            elif e.message.role != Role.USER:
                report.skipped += 1
            else:
                to_summarise.append(e)
        groups = group_entries(
            to_summarise, labels, window=self.config.window, max_size=self.config.group_size
        )
        report.groups = len(groups)
        summaries = {rec.id: rec for rec in covering.values()}
        texts = [
            self.summariser.summarise(
                [turn_text(e.message) for e in group.entries], self.config.summary_max_tokens
            ).strip()
            for group in groups
        ]
        if any(texts):  # one batched model call for every summary of the run
            self.embedder.embed([t for t in texts if t])
        for group, text in zip(groups, texts, strict=True):
            record, target_id = self._summarise(tenant, user_id, group, text, now, report)
            if record is not None:
                summaries[record.id] = record
            for mid in group.message_ids:
                if target_id:
                    into[mid] = target_id
        # Synthesis works over everything this run consolidated: the new summaries
        # and the memories extraction already made of the run's turns.
        inputs = {**summaries, **{rec.id: rec for rec in known.values() if rec.is_current}}
        fresh = [s for s in inputs.values() if not s.metadata.get("synthesised")]
        self._synthesise(tenant, user_id, fresh, now, report)
        self.store.mark(tenant, user_id, [s.id for s in fresh], synthesised=True)
        self._mark_consolidated(tenant, user_id, pending, into, report)
        return report

    # ----------------------------------------------------------------- phase 2
    def _provenance(
        self, tenant: str, user_id: str, pending: list[StmEntry]
    ) -> tuple[dict[str, MemoryRecord], dict[str, tuple[Kind, str | None]], dict[str, MemoryRecord]]:
        """One provenance lookup per turn gives every answer phases 2 and 3 need.

        * the summary that already covers the turn (an interrupted run wrote it), if any;
        * the turn's kind/category: from what extraction made of it, else the keyword lexicon;
        * the current memory extraction made of the turn, if any.
        """
        covering: dict[str, MemoryRecord] = {}
        labels: dict[str, tuple[Kind, str | None]] = {}
        known: dict[str, MemoryRecord] = {}
        for e in pending:
            derived = [
                r for r in self.store.find_by_source(tenant, user_id, e.message.id) if r.tier == Tier.LTM
            ]
            summary = next((r for r in derived if r.metadata.get("consolidation") == SUMMARY), None)
            if summary is not None:
                covering[e.message.id] = summary
                continue
            extracted = [r for r in derived if not r.metadata.get("consolidation") and not r.deleted]
            labels[e.message.id] = (
                (extracted[0].kind, extracted[0].category) if extracted else classify(e.message.content)
            )
            current = next((r for r in extracted if r.is_current), None)
            if current is not None:
                known[e.message.id] = current
        return covering, labels, known

    # ----------------------------------------------------------------- phase 3
    def _summarise(
        self, tenant: str, user_id: str, group: Group, text: str, now: datetime, report: ConsolidationReport
    ) -> tuple[MemoryRecord | None, str | None]:
        """Write the group's summary ``text``; returns (summary record, the memory the turns went into)."""
        if not text:
            return None, None
        sources = set(group.message_ids)
        # Written by a run killed before it could mark the record: adopt it, write nothing.
        for rec in self.store.find_by_source(tenant, user_id, group.message_ids[0]):
            if rec.tier == Tier.LTM and set(rec.source_ids) == sources and rec.content == text:
                self.store.mark(
                    tenant, user_id, [rec.id], consolidation=SUMMARY, consolidation_group=group.key
                )
                rec.metadata.update(consolidation=SUMMARY, consolidation_group=group.key)
                return rec, rec.id
        vector = self.embedder.embed([text])[0]
        nearest = self._nearest(tenant, user_id, vector)
        if nearest and nearest[0][1] >= self.config.duplicate_threshold:
            report.unchanged += 1  # NONE: LTM already says this
            return None, nearest[0][0].id
        op = ExtractionOp(
            op="ADD",
            content=text,
            kind=group.kind,
            category=group.category,
            event_time=group.last_time,
            source_ids=group.message_ids,
        )
        tags = {"consolidation": SUMMARY, "consolidation_group": group.key}
        written = self._write(tenant, user_id, [op], group.session_id, group.scope, now, report, tags)
        if not written:
            return None, None
        record = written[0]
        self.store.mark(tenant, user_id, [record.id], consolidation=SUMMARY, consolidation_group=group.key)
        record.metadata.update(consolidation=SUMMARY, consolidation_group=group.key)
        report.summaries += 1
        return record, record.id

    # ----------------------------------------------------------------- phase 4
    def _synthesise(
        self,
        tenant: str,
        user_id: str,
        summaries: list[MemoryRecord],
        now: datetime,
        report: ConsolidationReport,
    ) -> None:
        usable = sorted((s for s in summaries if s.scope == Scope.USER), key=lambda s: s.id)
        if not usable:
            return
        vectors = self.store.embeddings(tenant, user_id, [s.id for s in usable])
        usable = [s for s in usable if s.id in vectors]
        own = {s.id for s in usable}
        threshold = self.config.synthesis_similarity
        related: dict[str, list[tuple[MemoryRecord, float]]] = {
            s.id: [
                (r, c)
                for r, c in self._nearest(tenant, user_id, vectors[s.id])
                if r.id not in own and c >= threshold
            ]
            for s in usable
        }
        for cluster in clusters(usable, vectors, threshold):
            neighbours: dict[str, tuple[MemoryRecord, float]] = {}
            for s in cluster:
                for r, c in related[s.id]:
                    if r.id not in neighbours or c > neighbours[r.id][1]:
                        neighbours[r.id] = (r, c)
            ranked = sorted(neighbours.values(), key=lambda rc: (-rc[1], rc[0].id))
            own_sources = {sid for s in cluster for sid in s.source_ids}
            targets = [r for r, _ in ranked if r.metadata.get("consolidation") == SYNTHESIS]
            # Memories drawn from the same turns (their extraction) add no evidence of their own.
            facts = [
                r
                for r, _ in ranked
                if r.metadata.get("consolidation") != SYNTHESIS and not set(r.source_ids) <= own_sources
            ]
            target = targets[0] if targets else None
            if len(cluster) + len(facts) < 2 and target is None:
                continue  # one summary alone: nothing to synthesise it with
            sources = {sid for r in [*cluster, *facts] for sid in r.source_ids}
            if target is not None and sources <= set(target.source_ids):
                report.unchanged += 1  # this evidence is already in the synthesis
                continue
            texts = self.summariser.synthesise(
                [s.content for s in cluster],
                facts + ([target] if target else []),
                self.config.synthesis_max_tokens,
            )
            kind = Counter(s.kind for s in cluster).most_common(1)[0][0]
            majority = Counter(s.category for s in cluster).most_common(1)[0][0]
            ops: list[ExtractionOp] = []
            for i, text in enumerate(t.strip() for t in texts):
                if not text:
                    continue
                if i == 0 and target is not None:
                    ops.append(
                        ExtractionOp(
                            op="NONE" if text == target.content else "UPDATE",
                            target_id=target.id,
                            content=text,
                            kind=target.kind,
                            category=target.category,
                            source_ids=sorted(set(target.source_ids) | sources),
                        )
                    )
                    continue
                nearest = self._nearest(tenant, user_id, self.embedder.embed([text])[0])
                if nearest and nearest[0][1] >= self.config.duplicate_threshold:
                    report.unchanged += 1  # NONE: a current memory already states it
                    continue
                ops.append(
                    ExtractionOp(
                        op="ADD",
                        content=text,
                        kind=kind,
                        # What the statement itself is about, not the first of its sources' categories
                        # (a synthesis of a dinner and a move is not "dietary").
                        category=categorise(text) or majority,
                        event_time=max((s.event_time for s in cluster if s.event_time), default=None),
                        source_ids=sorted(sources),
                    )
                )
            report.unchanged += sum(1 for op in ops if op.op == "NONE")
            written = self._write(
                tenant,
                user_id,
                [op for op in ops if op.op != "NONE"],
                None,
                Scope.USER,
                now,
                report,
                {"consolidation": SYNTHESIS},
            )
            ids = [r.id for r in written if not r.deleted]
            self.store.mark(tenant, user_id, ids, consolidation=SYNTHESIS)
            report.syntheses += len(ids)

    # ----------------------------------------------------------------- phase 5
    def _mark_consolidated(
        self,
        tenant: str,
        user_id: str,
        pending: list[StmEntry],
        into: dict[str, str],
        report: ConsolidationReport,
    ) -> None:
        # The memory records first, the STM entries last: the STM flag is what ends the work.
        by_target: dict[str, list[str]] = {}
        for e in pending:
            by_target.setdefault(into.get(e.message.id, ""), []).append(e.message.id)
        by_target = {t: turn_record_ids(self.store, tenant, user_id, ids) for t, ids in by_target.items()}
        for target, ids in sorted(by_target.items()):
            extra = {"consolidated_into": target} if target else {}
            self.store.mark(tenant, user_id, ids, consolidated=True, **extra)
        report.marked = self.stm.mark_consolidated(tenant, user_id, [e.message.id for e in pending])

    # ----------------------------------------------------------------- helpers
    def _nearest(self, tenant: str, user_id: str, vector: np.ndarray) -> list[tuple[MemoryRecord, float]]:
        return nearest_ltm(
            self.store, tenant, user_id, vector, self.config.coarse_dim, self.config.neighbours
        )

    def _write(
        self,
        tenant: str,
        user_id: str,
        ops: list[ExtractionOp],
        session_id: str | None,
        scope: Scope,
        now: datetime,
        report: ConsolidationReport,
        tags: dict[str, Any] | None = None,
    ) -> list[MemoryRecord]:
        ops = rules.screen(self.configs(tenant), ops)
        if not ops:
            return []
        written = self.apply(
            self.store,
            self.embedder,
            self.config.coarse_dim,
            tenant,
            user_id,
            ops,
            session_id=session_id,
            scope=scope,
            now=now,
            metadata=tags,
            fence=self.fence,
        )
        for r in written:
            if r.replaces_id:
                report.updated += 1
            else:
                report.written += 1
            report.memory_ids.append(r.id)
        if self.on_written is not None and written:
            self.on_written(tenant, written)
        return written
