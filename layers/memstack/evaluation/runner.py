"""Runs the product on a benchmark: ingest each conversation into a fresh store, search every question.

The same harness runs LoCoMo (``memstack eval locomo``) and BEAM (``memstack
eval beam``: the BEAM loader reads into the same ``Conversation``).

Each conversation gets its own embedded store and one user; every turn is
ingested as a message (id = its dialog id, speaker, timestamp = its
session's date, image turns with their caption), session by session, the way
an agent would send them. By default ingestion is the product's own
(``infer``: extraction runs on every turn, as ``POST /v1/memories`` does);
``infer=False`` stores the raw turns only. With ``consolidate`` the
consolidation job runs after each session, as the scheduler would between
two conversations a day apart.

Every question with usable evidence is then searched with ``reference_time``
= the conversation's last session date, through the full pipeline and, with
``baselines``, through BM25 alone and the vector stage alone on the same
store in the same run, and through two plain baselines over the raw turns
that share nothing with memstack's indexing: BM25 (``domain.bm25``) over each
turn's text and dense cosine over each turn's embedding, with the same
embedder. Each question's evidence ranks are kept (``QuestionResult``), so
every metric of ``recall`` is computed from them. Questions the conversation
cannot answer (BEAM's abstention) are searched too: their top score against
the answerable questions' is the abstention AUROC (``separation``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import memstack
from memstack.domain.bm25 import Bm25Index
from memstack.domain.indexing import turn_text
from memstack.domain.retrieval.types import SearchRequest
from memstack.evaluation.locomo import CATEGORIES, Conversation, Question
from memstack.evaluation.recall import MetricTable, QuestionResult
from memstack.evaluation.separation import (
    Ordering,
    SearchLevel,
    abstention_summary,
    evidence_summary,
    ordering_summary,
    update_ordering,
)
from memstack.factory import build_embedder, build_service
from memstack.models import MemoryFilters, Message, Tier
from memstack.ports.embedder import Embedder
from memstack.service import MemoryService
from memstack.settings import Settings

CATEGORY_ORDER = [CATEGORIES[c] for c in (4, 1, 2, 3, 5)]
#: the pipeline; its BM25 stage and its vector stage alone (same store); plain baselines on raw turns
RETRIEVERS = ("memstack", "bm25", "vector", "bm25-turns", "dense-turns")
TENANT = "eval"
USER = "locomo"


def question_request(conv: Conversation, text: str, top_k: int, *, explain: bool = False) -> SearchRequest:
    """The search a benchmark question makes: the eval user, asked as of the conversation's last session."""
    return SearchRequest(
        tenant=TENANT,
        user_id=USER,
        query=text,
        top_k=top_k,
        reference_time=conv.last_session_time,
        filters=MemoryFilters(),
        explain=explain,
    )


Progress = Callable[[str, int], None]


@dataclass
class EvalReport:
    questions: int
    #: turn recall@k of the pipeline: {"10": {"all": .., "<category>": ..}}
    recall: dict[str, dict[str, float | None]]
    #: turn recall@k of BM25 alone and the vector stage alone
    baselines: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    #: every metric of every retriever: {retriever: {metric: {k: {category: mean}}}}
    metrics: dict[str, dict[str, dict[str, dict[str, float | None]]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    #: what ingestion left in the stores: records per tier, LTM records per origin
    stored: dict[str, int] = field(default_factory=dict)
    unusable_questions: int = 0
    dropped_evidence: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    #: median milliseconds per pipeline stage over every search of the run
    stage_ms_median: dict[str, float] = field(default_factory=dict)
    #: 95th percentile of the whole search (query embedding excluded: questions are embedded in batches)
    search_ms_p95: float = 0.0
    #: per question: conversation, category, text, evidence and, per retriever, where the evidence ranked
    per_question: list[dict[str, Any]] = field(default_factory=list)
    #: per retriever: AUROC of the top score, answerable against unanswerable questions (and medians)
    abstention: dict[str, dict[str, float | None]] = field(default_factory=dict)
    #: per retriever: knowledge-update questions with the updated turn in the top 5 / above the original
    knowledge_update: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    #: per baseline and k: questions where the pipeline's turn recall is higher / lower than the baseline's
    versus: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    #: questions searched that the conversation cannot answer (in ``abstention``, not in recall)
    unanswerable: int = 0
    #: the pipeline's per-search ``evidence`` beside its top score: AUROC of each for "answerable"
    #: and for "one of the first 10 results cites evidence" (``separation.evidence_summary``)
    evidence: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def messages_of(conv: Conversation, session: int | None = None) -> list[Message]:
    """The turns of one session (every session: None) as the messages an agent would send."""
    return [
        Message(id=t.dia_id, role=t.role, speaker=t.speaker or None, content=t.content, timestamp=t.timestamp)
        for t in conv.turns
        if (session is None or t.session == session) and t.content.strip()
    ]


class _QueryMemo:
    """Wraps the embedder so each text of a conversation is embedded once, questions in batches.

    The questions of a conversation are embedded together up front (batches
    are far cheaper per text than one call per question); the pipeline and
    the vector baselines then read the same vectors, and the dense baseline
    reads the turn vectors ingestion computed. ``reset`` forgets them between
    conversations.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = inner.name
        self._known: dict[str, np.ndarray] = {}

    def reset(self) -> None:
        self._known = {}

    def prime(self, questions: Sequence[str]) -> None:
        self.embed(list(questions))

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return self.inner.embed(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._known))
        if missing:
            self._known.update(zip(missing, self.inner.embed(missing), strict=True))
        return np.vstack([self._known[t] for t in texts])


class TurnBaselines:
    """Plain BM25 and plain dense cosine over a conversation's raw turns (each turn's own text).

    Nothing of memstack's indexing (context turns, dates, memories) is in
    them: they are what "just index the turns" would return.
    """

    def __init__(self, messages: Sequence[Message], embedder: Embedder) -> None:
        texts = [turn_text(m) for m in messages]
        self.ids = [m.id or "" for m in messages]
        self.bm25 = Bm25Index(texts)
        matrix = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.vectors = matrix / np.where(norms > 0, norms, 1.0)
        self.embedder = embedder

    def rank_bm25(self, query: str, k: int) -> tuple[list[list[str]], float]:
        top = self.bm25.top(query, k)
        return [[self.ids[i]] for i, _ in top], (top[0][1] if top else 0.0)

    def rank_dense(self, query: str, k: int) -> tuple[list[list[str]], float]:
        q = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        scores = self.vectors @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [[self.ids[i]] for i in order.tolist()], (float(scores[order[0]]) if len(order) else 0.0)


#: the code that decides what an ingested store holds (relative to the memstack package): the
#: extractor and its rules, the embedders, ingest and indexing, the embedded store (and consolidation's,
#: for a store built with it). A change to any of them makes a kept store stale; a ranking change
#: (domain/retrieval) keeps it.
_INGEST_CODE = (
    "domain/extraction",
    "adapters/llm",
    "adapters/embedders",
    "domain/time",
    "domain/ingest.py",
    "domain/indexing.py",
    "domain/chunks.py",
    "domain/adjacent.py",
    "domain/categories.py",
    "domain/text.py",
    "adapters/embedded",
)


#: consolidation's code, part of the digest of a store built with it
_CONSOLIDATION_CODE = ("domain/consolidation",)


def ingest_code_digest(root: Path | None = None, *, consolidate: bool = False) -> str:
    """A digest of the ingest code's source files (``_INGEST_CODE`` under ``root``, by default the
    installed package), so that a store kept by ``--store-dir`` is not silently reused after the
    extractor changed."""
    root = root or Path(memstack.__file__).parent
    digest = hashlib.blake2b(digest_size=12)
    for entry in (*_INGEST_CODE, *(_CONSOLIDATION_CODE if consolidate else ())):
        path = root / entry
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
        for file in files:
            digest.update(file.relative_to(root).as_posix().encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def ingest_fingerprint(
    settings: Settings, infer: bool, consolidate: bool, per_turn: bool = False
) -> dict[str, Any]:
    """What decides the contents of an evaluation store (a kept store is reused only if it matches)."""
    passages = settings.ingest.passage_chars
    return {
        # only when on: a session-batched store keeps its fingerprint
        **({"per_turn": True} if per_turn else {}),
        "code": ingest_code_digest(consolidate=consolidate),
        # only when on: a store built before passages existed is still reused while they are off
        **({"passages": [passages, settings.ingest.passage_roles]} if passages else {}),
        "embedder": settings.embedder,
        "llm": settings.llm,
        "infer": infer,
        "consolidate": consolidate,
        "coarse_dim": settings.embedding.coarse_dim,
        "indexing": settings.ingest.indexing.model_dump(),
        "consolidation": {
            k: v for k, v in settings.values().items() if k.startswith(("consolidation", "profile"))
        },
    }


@contextmanager
def _store_root(store_dir: Path | None) -> Iterator[Path]:
    if store_dir is not None:
        store_dir.mkdir(parents=True, exist_ok=True)
        yield store_dir
        return
    with tempfile.TemporaryDirectory(prefix="memstack-eval-") as tmp:
        yield Path(tmp)


def _ingest(
    service: MemoryService,
    conv: Conversation,
    infer: bool,
    consolidate: bool,
    tick: Progress,
    per_turn: bool = False,
) -> None:
    """Each session as one add, or (``per_turn``) each of its turns as one: an agent's usual pattern."""
    for session in sorted(conv.sessions):
        msgs = messages_of(conv, session)
        batches = [[m] for m in msgs] if per_turn else [msgs] if msgs else []
        for batch in batches:
            service.add(TENANT, USER, batch, session_id=f"session_{session}", infer=infer, sync=infer)
        if msgs and consolidate:
            service.consolidate(TENANT, USER, now=datetime.now(UTC))
        tick("ingest", len(msgs))


def _stored_counts(service: MemoryService) -> dict[str, int]:
    counts: dict[str, int] = {}
    cursor: str | None = None
    while True:
        records, cursor = service.store.list(TENANT, USER, MemoryFilters(), 500, cursor)
        for r in records:
            if r.tier == Tier.STM:
                key = "stm_passage" if "passage" in r.metadata else "stm"
            else:
                key = f"ltm_{r.metadata.get('consolidation') or 'extracted'}"
            counts[key] = counts.get(key, 0) + 1
        if not cursor:
            return counts


def _record_sources(service: MemoryService, ids: Sequence[str]) -> list[list[str]]:
    records = service.store.get_many(TENANT, USER, list(ids))
    return [records[i].source_ids for i in ids if i in records]


@dataclass
class _Run:
    """The state of one evaluation run: its settings and everything measured so far."""

    settings: Settings
    ks: list[int]
    baselines: bool
    infer: bool
    consolidate: bool
    tick: Progress
    #: one add per turn (else per session)
    per_turn: bool = False
    tables: dict[str, MetricTable] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=lambda: {"ingest": 0.0, "search": 0.0})
    durations: dict[str, list[float]] = field(default_factory=dict)
    stored: dict[str, int] = field(default_factory=dict)
    per_question: list[dict[str, Any]] = field(default_factory=list)
    #: per retriever: the top score of (answerable, unanswerable) questions
    top_scores: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    #: per retriever: the knowledge-update ordering of each question that has one
    orderings: dict[str, list[Ordering]] = field(default_factory=dict)
    #: per question: the pipeline's ``evidence`` and top score, answerable, found in the first 10
    search_level: list[SearchLevel] = field(default_factory=list)
    #: the pipeline's ``evidence`` of the last search (``rankings``)
    last_evidence: float = 0.0

    def __post_init__(self) -> None:
        names = RETRIEVERS if self.baselines else RETRIEVERS[:1]
        self.tables = {name: MetricTable(self.ks) for name in names}

    @property
    def depth(self) -> int:
        return max(self.ks)

    @property
    def top_k(self) -> int:
        # Ask for more records than sources needed: LTM memories and their turns may share sources.
        return min(self.settings.api.max_top_k, 2 * self.depth)

    def open_store(self, root: Path, conv: Conversation, embedder: Embedder, keep: bool) -> MemoryService:
        """The conversation's store: reused when kept with the same ingest settings, else ingested now."""
        data_dir = root / conv.sample_id
        marker = data_dir / "ingest.json"
        fingerprint = ingest_fingerprint(self.settings, self.infer, self.consolidate, self.per_turn)
        # A store outside the data directory (postgres) holds every conversation under the same
        # user: never reuse it, and start each conversation from an empty user there.
        external = self.settings.store_backend != "embedded"
        reuse = keep and not external and marker.exists() and json.loads(marker.read_text()) == fingerprint
        if keep and not reuse and data_dir.exists():
            shutil.rmtree(data_dir)
        service = build_service(self.settings.model_copy(update={"data_dir": data_dir}), embedder=embedder)
        start = time.perf_counter()
        if reuse:
            self.tick("ingest", sum(1 for t in conv.turns if t.content.strip()))
        else:
            service.store.erase_user(TENANT, USER)
            _ingest(service, conv, self.infer, self.consolidate, self.tick, self.per_turn)
            if keep:
                marker.write_text(json.dumps(fingerprint))
        self.timings["ingest"] += time.perf_counter() - start
        for key, n in _stored_counts(service).items():
            self.stored[key] = self.stored.get(key, 0) + n
        return service

    def rankings(
        self, service: MemoryService, req: SearchRequest, plain: TurnBaselines | None
    ) -> dict[str, tuple[list[list[str]], float]]:
        """The cited turns of each result and the top score, per retriever, best first."""
        result = service.search(req)
        self.last_evidence = result.evidence
        for stage, ms in result.stage_durations.items():
            self.durations.setdefault(stage, []).append(ms)
        top = result.hits[0].score if result.hits else 0.0
        ranked = {"memstack": ([h.record.source_ids for h in result.hits], top)}
        if self.baselines:
            bm25 = service.store.bm25_search(TENANT, USER, req.query, req.top_k, req.filters)
            ranked["bm25"] = (_record_sources(service, [s.id for s in bm25]), bm25[0].score if bm25 else 0.0)
            qvec = service.embedder.embed([req.query])[0]
            vec = service.retriever.vector_stage(req, qvec)[: req.top_k]
            ranked["vector"] = (_record_sources(service, [s.id for s in vec]), vec[0].score if vec else 0.0)
        if plain is not None:
            ranked["bm25-turns"] = plain.rank_bm25(req.query, req.top_k)
            ranked["dense-turns"] = plain.rank_dense(req.query, req.top_k)
        return ranked

    def search_all(self, service: MemoryService, conv: Conversation, embedder: Embedder) -> None:
        session_of = {t.dia_id: str(t.session) for t in conv.turns}

        def session(turn: str) -> str:
            return session_of.get(turn, turn)

        plain = TurnBaselines(messages_of(conv), embedder) if self.baselines else None
        start = time.perf_counter()
        for q in conv.questions:
            req = question_request(conv, q.text, self.top_k)
            entry: dict[str, Any] = {
                "conversation": conv.sample_id,
                "category": q.category_name,
                "question": q.text,
                "evidence": list(q.evidence),
                "answerable": q.answerable,
            }
            for name, (results, top_score) in self.rankings(service, req, plain).items():
                entry[name] = {"top_score": round(float(top_score), 6)}
                self.top_scores.setdefault(name, ([], []))[0 if q.answerable else 1].append(float(top_score))
                if q.evidence:
                    entry[name].update(self._measure(name, q, results, session))
            ranks = [r for r in entry["memstack"].get("evidence_ranks", []) if r is not None]
            entry["memstack"]["evidence"] = round(self.last_evidence, 6)
            self.search_level.append(
                SearchLevel(
                    self.last_evidence,
                    entry["memstack"]["top_score"],
                    q.answerable,
                    bool(ranks) and min(ranks) <= 10,
                )
            )
            self.per_question.append(entry)
            self.tick("search", 1)
        self.timings["search"] += time.perf_counter() - start

    def _measure(
        self, name: str, q: Question, results: list[list[str]], session: Callable[[str], str]
    ) -> dict[str, Any]:
        res = QuestionResult.from_results(q.category_name, results, q.evidence, session, self.depth)
        self.tables[name].add(res)
        out: dict[str, Any] = {
            "evidence_ranks": list(res.evidence_ranks),
            "session_rank": res.session_rank,
            "cited": list(res.cited_by_results[: self.depth]),
        }
        ordering = update_ordering(
            dict(zip(dict.fromkeys(q.evidence), res.evidence_ranks, strict=True)), q.groups
        )
        if ordering is not None:
            self.orderings.setdefault(name, []).append(ordering)
            out["updated_in_top5"], out["updated_first"] = ordering.updated_in_top5, ordering.updated_first
        return out

    def versus(self) -> dict[str, dict[str, dict[str, int]]]:
        """Per baseline and k: questions where memstack's turn recall is above / below the baseline's."""
        main = self.tables["memstack"].results
        out: dict[str, dict[str, dict[str, int]]] = {}
        for name, table in self.tables.items():
            if name == "memstack":
                continue
            out[name] = {}
            for k in self.ks:
                pairs = [
                    (a.value("turn_recall", k), b.value("turn_recall", k))
                    for a, b in zip(main, table.results, strict=True)
                ]
                out[name][str(k)] = {
                    "better": sum(1 for a, b in pairs if a > b),
                    "worse": sum(1 for a, b in pairs if a < b),
                }
        return out

    def report(self, conversations: Sequence[Conversation], categories: Sequence[str]) -> EvalReport:
        main = self.tables["memstack"]
        totals = sorted(self.durations.get("total", [0.0]))
        return EvalReport(
            questions=len(main.results),
            recall=main.means(categories),
            baselines={n: t.means(categories) for n, t in self.tables.items() if n != "memstack"},
            metrics={name: t.all_means(categories) for name, t in self.tables.items()},
            counts={name: main.counts.get(name, 0) for name in ["all", *categories]},
            config={
                "embedder": self.settings.embedder,
                "reranker": self.settings.reranker,
                "infer": self.infer,
                "consolidate": self.consolidate,
                "per_turn": self.per_turn,
                "top_k": self.top_k,
                "conversations": len(conversations),
                **self.settings.retrieval.model_dump(),
                "indexing": self.settings.ingest.indexing.model_dump(),
            },
            stored=self.stored,
            unusable_questions=sum(c.unusable for c in conversations),
            dropped_evidence=sum(len(q.dropped_evidence) for c in conversations for q in c.questions),
            seconds={k: round(v, 2) for k, v in self.timings.items()},
            stage_ms_median={k: round(statistics.median(v), 3) for k, v in self.durations.items()},
            search_ms_p95=round(totals[min(len(totals) - 1, int(0.95 * len(totals)))], 3),
            per_question=self.per_question,
            abstention={
                name: abstention_summary(yes, no) for name, (yes, no) in self.top_scores.items() if no
            },
            knowledge_update={name: ordering_summary(o) for name, o in self.orderings.items()},
            versus=self.versus(),
            unanswerable=sum(1 for c in conversations for q in c.questions if not q.answerable),
            evidence=evidence_summary(self.search_level),
        )


def conversation_services(
    conversations: Sequence[Conversation],
    settings: Settings,
    store_dir: Path,
    *,
    infer: bool = True,
    consolidate: bool = False,
    embedder: Embedder | None = None,
) -> Iterator[tuple[Conversation, MemoryService]]:
    """Each conversation with a service over its kept store (ingested first if needed), closed after.

    For tools that search the evaluation stores their own way (scripts/calibrate_scores.py).
    """
    run = _Run(settings, [1], False, infer, consolidate, lambda _stage, _n: None)
    model = embedder or build_embedder(settings)
    for conv in conversations:
        service = run.open_store(store_dir, conv, model, keep=True)
        try:
            yield conv, service
        finally:
            service.close()


def evaluate(
    conversations: Sequence[Conversation],
    settings: Settings,
    ks: Sequence[int],
    *,
    baselines: bool = False,
    infer: bool = True,
    consolidate: bool = False,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
    store_dir: Path | None = None,
    categories: Sequence[str] = CATEGORY_ORDER,
    per_turn: bool = False,
) -> EvalReport:
    """Every metric of the pipeline (and the baselines) over every usable question.

    ``store_dir`` keeps each conversation's store (``<store_dir>/<sample_id>``)
    and reuses it on the next run when its ingest settings match, so trying
    retrieval settings does not re-ingest; without it the stores are temporary.
    """
    run = _Run(
        settings,
        sorted(set(ks)),
        baselines,
        infer,
        consolidate,
        progress or (lambda _stage, _n: None),
        per_turn=per_turn,
    )
    # One model for every conversation (it loads once).
    memo = _QueryMemo(embedder or build_embedder(settings))
    with _store_root(store_dir) as root:
        for conv in conversations:
            memo.reset()
            service = run.open_store(root, conv, memo, keep=store_dir is not None)
            try:
                memo.prime([q.text for q in conv.questions])
                run.search_all(service, conv, memo)
            finally:
                service.close()
    return run.report(conversations, categories)
