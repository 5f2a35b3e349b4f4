"""Runs the product on LoCoMo: ingest each conversation into a fresh store, search every question.

Each conversation gets its own embedded store (a temporary data directory)
and one user; every turn is ingested as a message (id = its dialog id,
speaker, timestamp = its session's date, image turns with their caption),
session by session. Every question with usable evidence is then searched
with ``reference_time`` = the conversation's last session date, through the
full pipeline and, with ``baselines``, through BM25 alone and the vector
stage alone on the same store in the same run.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memstack.domain.retrieve import SearchRequest
from memstack.evaluation.locomo import CATEGORIES, Conversation
from memstack.evaluation.recall import RecallTable, distinct_sources
from memstack.factory import build_embedder, build_service, indexing_config, retrieval_config
from memstack.models import MemoryFilters, Message, Role
from memstack.ports.embedder import Embedder
from memstack.service import MemoryService
from memstack.settings import Settings

CATEGORY_ORDER = [CATEGORIES[c] for c in (4, 1, 2, 3, 5)]
TENANT = "eval"
USER = "locomo"

Progress = Callable[[str, int], None]


@dataclass
class EvalReport:
    questions: int
    recall: dict[str, dict[str, float | None]]
    baselines: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    unusable_questions: int = 0
    dropped_evidence: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    #: median milliseconds per pipeline stage over every search of the run
    stage_ms_median: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def messages_of(conv: Conversation, session: int) -> list[Message]:
    return [
        Message(id=t.dia_id, role=Role.USER, speaker=t.speaker, content=t.content, timestamp=t.timestamp)
        for t in conv.turns
        if t.session == session and t.content.strip()
    ]


class _QueryMemo:
    """Wraps the embedder so each question is embedded once, in batches.

    The questions of a conversation are embedded together up front (batches
    are far cheaper per text than one call per question); the pipeline and
    the vector baseline then read the same vectors. Other texts (the turns
    being ingested) pass straight through.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = inner.name
        self._questions: dict[str, np.ndarray] = {}

    def prime(self, questions: Sequence[str]) -> None:
        texts = list(dict.fromkeys(questions))
        self._questions = dict(zip(texts, self.inner.embed(texts), strict=True)) if texts else {}

    def embed(self, texts: list[str]) -> np.ndarray:
        if texts and all(t in self._questions for t in texts):
            return np.vstack([self._questions[t] for t in texts])
        return self.inner.embed(texts)


def _sources(service: MemoryService, ids: Sequence[str], limit: int) -> list[str]:
    records = service.store.get_many(TENANT, USER, list(ids))
    return distinct_sources((records[i].source_ids for i in ids if i in records), limit)


def evaluate(
    conversations: Sequence[Conversation],
    settings: Settings,
    ks: Sequence[int],
    *,
    baselines: bool = False,
    infer: bool = False,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
) -> EvalReport:
    """Recall@k of the pipeline (and the baselines) over every usable question."""
    ks = sorted(set(ks))
    depth = max(ks)
    # Ask for more records than sources needed: LTM memories and their turns may share sources.
    top_k = min(settings.max_top_k, 2 * depth)
    tables = {"memstack": RecallTable(ks)}
    if baselines:
        tables.update({"bm25": RecallTable(ks), "vector": RecallTable(ks)})
    timings = {"ingest": 0.0, "search": 0.0}
    durations: dict[str, list[float]] = {}
    tick = progress or (lambda _stage, _n: None)
    # One model for every conversation (it loads once).
    memo = _QueryMemo(embedder or build_embedder(settings))
    with tempfile.TemporaryDirectory(prefix="memstack-eval-") as tmp:
        for conv in conversations:
            run_settings = settings.model_copy(update={"data_dir": Path(tmp) / conv.sample_id})
            service = build_service(run_settings, embedder=memo)
            try:
                # A store outside the data directory (postgres) outlives the run:
                # each conversation starts from an empty user there too.
                service.store.erase_user(TENANT, USER)
                start = time.perf_counter()
                for session in sorted(conv.sessions):
                    msgs = messages_of(conv, session)
                    if msgs:
                        service.add(
                            TENANT, USER, msgs, session_id=f"session_{session}", infer=infer, sync=infer
                        )
                    tick("ingest", len(msgs))
                timings["ingest"] += time.perf_counter() - start
                start = time.perf_counter()
                memo.prime([q.text for q in conv.questions])
                for q in conv.questions:
                    req = SearchRequest(
                        tenant=TENANT,
                        user_id=USER,
                        query=q.text,
                        top_k=top_k,
                        reference_time=conv.last_session_time,
                        filters=MemoryFilters(),
                    )
                    result = service.search(req)
                    for stage, ms in result.stage_durations.items():
                        durations.setdefault(stage, []).append(ms)
                    ranked = distinct_sources((h.record.source_ids for h in result.hits), depth)
                    tables["memstack"].add(q.category_name, ranked, q.evidence)
                    if baselines:
                        bm25 = service.store.bm25_search(TENANT, USER, q.text, top_k, req.filters)
                        tables["bm25"].add(
                            q.category_name, _sources(service, [s.id for s in bm25], depth), q.evidence
                        )
                        qvec = service.embedder.embed([q.text])[0]
                        vec = service.retriever.vector_stage(req, qvec)[:top_k]
                        tables["vector"].add(
                            q.category_name, _sources(service, [s.id for s in vec], depth), q.evidence
                        )
                    tick("search", 1)
                timings["search"] += time.perf_counter() - start
            finally:
                service.close()
    main = tables["memstack"]
    return EvalReport(
        questions=main.counts.get("all", 0),
        recall=main.means(CATEGORY_ORDER),
        baselines={name: t.means(CATEGORY_ORDER) for name, t in tables.items() if name != "memstack"},
        counts={name: main.counts.get(name, 0) for name in ["all", *CATEGORY_ORDER]},
        config={
            "embedder": settings.embedder,
            "reranker": settings.reranker,
            "infer": infer,
            "top_k": top_k,
            **asdict(retrieval_config(settings)),
            "indexing": asdict(indexing_config(settings)),
        },
        unusable_questions=sum(c.unusable for c in conversations),
        dropped_evidence=sum(len(q.dropped_evidence) for c in conversations for q in c.questions),
        seconds={k: round(v, 2) for k, v in timings.items()},
        stage_ms_median={k: round(statistics.median(v), 3) for k, v in durations.items()},
    )
