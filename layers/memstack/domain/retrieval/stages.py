"""Stages 2, 6, 7 and 8 of retrieval, each a function of the store, the embedder or the reranker.

Stages 1 (``memstack.domain.query_analysis``), 4 and 5 (``memstack.domain.scoring``)
are pure functions; ``pipeline.Retriever`` runs all eight in order.
"""

from __future__ import annotations

import numpy as np

from memstack.domain import versions
from memstack.domain.retrieval.feedback import expanded_query, expansion_terms
from memstack.domain.retrieval.pool import Pool, full_vectors, stacked
from memstack.domain.retrieval.types import RetrievalConfig, SearchHit, SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord, ScoredId
from memstack.ports.reranker import Reranker
from memstack.ports.store import CandidateVectors, MemoryStore


def vector_search(
    store: MemoryStore,
    req: SearchRequest,
    filters: MemoryFilters,
    query_vec: np.ndarray,
    coarse_dim: int,
    candidates: int,
) -> tuple[list[ScoredId], dict[str, np.ndarray]]:
    """Stage 2, Matryoshka two-stage: the coarse prefix picks candidates, full-dim cosine ranks them.

    Returns the rescored ranking and the full vectors it read by id (the pool reuses them;
    a store that slices them from an index returns none).
    """
    coarse = coarse_prefix(query_vec, coarse_dim)
    if isinstance(store, CandidateVectors):  # a remote store: hits and vectors in one round trip
        found, full = store.vector_candidates(req.tenant, req.user_id, coarse, candidates, filters)
        ids, matrix = stacked([c.id for c in found], full)
    else:
        found = store.vector_search(req.tenant, req.user_id, coarse, candidates, filters)
        if not found:
            return [], {}
        ids, matrix, full = full_vectors(store, req.tenant, req.user_id, [c.id for c in found])
    if not ids:
        return [], full
    scores = matrix @ np.asarray(query_vec, dtype=np.float32)
    order = np.argsort(-scores, kind="stable")
    return [
        ScoredId(id=ids[i], score=score)
        for i, score in zip(order.tolist(), scores[order].tolist(), strict=True)
    ], full


def feedback_search(
    store: MemoryStore,
    req: SearchRequest,
    filters: MemoryFilters,
    first: list[ScoredId],
    cfg: RetrievalConfig,
) -> tuple[list[ScoredId], list[str]]:
    """Stage 3's second query (RM3-style feedback): returns its ranking and the terms it added."""
    head = first[: cfg.prf_docs]
    records = store.get_many(req.tenant, req.user_id, [h.id for h in head])
    feedback = [
        (records[h.id].search_text or records[h.id].content, h.score) for h in head if h.id in records
    ]
    terms = expansion_terms(req.query, feedback, cfg.prf_terms, cfg.prf_min_docs)
    if not terms:
        return [], []
    query = expanded_query(req.query, terms)
    return store.bm25_search(req.tenant, req.user_id, query, cfg.bm25_candidates, filters), terms


def merge_turns_into_memories(pool: Pool) -> set[int]:
    """Raw turns that a current LTM memory in the pool was last made from; returns their rows.

    The turn and the memory state one fact: the memory is kept (it is current,
    categorised, dated) and takes the better of the two scores, so merging
    never pushes the fact down the list. Provenance is unchanged: the memory's
    ``source_ids`` name the turn.
    """
    sources = pool.facts.last_source
    memory_of: dict[str | None, int] = {}
    for j in pool.order:
        if not pool.stm[j] and pool.current[j] and not pool.deleted[j] and pool.n_sources[j]:
            # Only the newest source: an updated memory ("lives in Osaka", from the
            # Tokyo turn and the Osaka turn) replaces what the Osaka turn said, while
            # the Tokyo turn stays findable as what was said before.
            source = sources[j]
            best = memory_of.get(source)
            if best is None or pool.score[j] > pool.score[best]:
                memory_of[source] = j
    merged: set[int] = set()
    if not memory_of:
        return merged
    for j in pool.order:
        if not pool.stm[j] or pool.n_sources[j] != 1:
            continue
        memory = memory_of.get(sources[j])
        if memory is None:
            continue
        merged.add(j)
        if pool.score[j] > pool.score[memory]:
            pool.put("merged_turn_score", memory, pool.score[j])
            pool.rescore(memory, pool.score[j])
    return merged


def rerank(reranker: Reranker, query: str, records: list[MemoryRecord]) -> list[float]:
    """Stage 7: the cross-encoder's score of each record's text for the query.

    Raises whatever the reranker raises; the pipeline records it as degraded.
    """
    if not records:
        return []
    passages = [f"{r.speaker}: {r.content}" if r.speaker else r.content for r in records]
    scores = reranker.rerank(query, passages)
    if len(scores) != len(records):
        raise ValueError(f"reranker returned {len(scores)} scores for {len(records)} passages")
    return [float(score) for score in scores]


def expand_history(
    store: MemoryStore, req: SearchRequest, hits: list[SearchHit], max_versions: int
) -> list[SearchHit]:
    """Stage 8: each hit's version chain, oldest first, older versions marked ``superseded``.

    A chain appears once, where its best hit ranked; tombstones are left out
    (they hold no content), a chain that ends in one (a deleted memory) is left
    out whole, and so is anything outside the caller's filters' tenant and
    user (the store reads are scoped by both).
    """
    out: list[SearchHit] = []
    seen: set[str] = set()
    for hit in hits:
        if hit.record.id in seen:
            continue
        chain: list[MemoryRecord] = versions.history(
            store, req.tenant, req.user_id, hit.record.id, hit.record
        )
        seen.update(r.id for r in chain)
        if chain[-1].deleted:
            continue  # a deleted memory: none of its versions is ever a result
        shown = [r for r in chain if not r.deleted][-max_versions:]
        if len(shown) <= 1:
            out.append(hit)
            continue
        for record in shown:
            is_hit = record.id == hit.record.id
            entry = hit if is_hit else SearchHit(record=record, score=hit.score, stages={})
            entry.superseded = not record.is_current
            entry.stages["history_version"] = float(record.version)
            out.append(entry)
    return out
