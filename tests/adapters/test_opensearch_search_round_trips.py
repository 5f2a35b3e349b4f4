"""One search through the real pipeline on the OpenSearch store: its requests, counted on the wire.

The store and the opensearch-py client are the real ones; ``RankingWire`` answers
their requests as a cluster would, closely enough to rank: BM25 bodies by the
query's words each document holds, k-NN bodies by cosine on the coarse vectors
(both inside the bodies' term filters), term-count aggregations by the same word
match. What is checked is the requests a search sends, and that the search
answers exactly what it answers when the store is asked one search at a time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.adapters.opensearch.store import OpenSearchMemoryStore
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.domain.text import index_terms, query_terms
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryRecord, Tier
from memstack.ports.store import HybridCandidates, HybridWithTermCounts

from tests.adapters.opensearch_fake import Request
from tests.infra.opensearch_wire import Wire, _matches

FULL, COARSE = 64, 16
ALIAS = "memstack-memories"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TEXTS = [
    "Alex moved to Lisbon in March",
    "Alex adopted a greyhound called Pixel",
    "Pixel the greyhound hates rain",
    "My sister lives in Porto near the river",
    "Alex works as a nurse at the Lisbon hospital",
    "We had tea and cake at the bakery",
]


def _words_score(multi_match: dict[str, Any], source: dict[str, Any]) -> float:
    """How many of the query's words the document's fields hold (0: no match)."""
    held: set[str] = set()
    for name in multi_match["fields"]:
        held |= index_terms(str(source.get(name) or ""))
    return float(sum(1 for w in query_terms(multi_match["query"], stems=True) if w in held))


class RankingWire(Wire):
    """``Wire`` that ranks: BM25 by the words matched, k-NN by cosine, ties by document id."""

    def _hits(self, body: dict[str, Any]) -> dict[str, Any]:
        query = body.get("query", {})
        if "knn" in query:
            ((name, knn),) = query["knn"].items()
            q = np.asarray(knn["vector"], dtype=np.float64)
            scored = [
                ((1.0 + _cosine(q, np.asarray(s[name]))) / 2.0, i, s)
                for i, s in self.docs.items()
                if name in s and _matches(knn["filter"], s)
            ]
        elif "multi_match" in json.dumps(query.get("bool", {}).get("must", [])):
            (clause,) = query["bool"]["must"]
            scored = [
                (_words_score(clause["multi_match"], s), i, s)
                for i, s in self.docs.items()
                if _matches(query, s) and _words_score(clause["multi_match"], s) > 0
            ]
        else:
            return super()._hits(body)
        ranked = sorted(scored, key=lambda x: (-x[0], x[1]))[: body.get("size", 10)]
        hits = [{"_id": i, "_source": s, "_score": score} for score, i, s in ranked]
        return {"total": {"value": len(scored), "relation": "eq"}, "max_score": None, "hits": hits}

    def _aggregation(self, body: dict[str, Any], agg: dict[str, Any]) -> dict[str, Any]:
        clause = agg.get("filter", {}).get("multi_match")
        if clause is None:
            return super()._aggregation(body, agg)
        query = body.get("query", {})
        held = [s for s in self.docs.values() if _matches(query, s) and _words_score(clause, s) > 0]
        return {"doc_count": len(held)}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / ((np.linalg.norm(a) * np.linalg.norm(b)) or 1.0))


class OneSearchAtATime:
    """The store without its combined searches: the pipeline asks each search alone."""

    def __init__(self, store: OpenSearchMemoryStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("hybrid_candidates", "hybrid_candidates_with_counts"):
            raise AttributeError(name)
        return getattr(self._store, name)


@pytest.fixture
def wired() -> tuple[OpenSearchMemoryStore, RankingWire, HashingEmbedder]:
    wire = RankingWire()
    store = OpenSearchMemoryStore.managed(wire.client(), alias=ALIAS, embedding_dim=FULL, coarse_dim=COARSE)
    embedder = HashingEmbedder(FULL)
    records = []
    for n, text in enumerate(TEXTS):
        vec = embedder.embed([text])[0]
        records.append(
            MemoryRecord(
                id=f"m{n}",
                tenant="t1",
                user_id="u1",
                tier=Tier.LTM,
                content=text,
                created_at=T0,
                source_ids=[f"s{n}"],
                embedding_full=vec.tolist(),
                embedding_coarse=coarse_prefix(vec, COARSE).tolist(),
            )
        )
    store.put(records)
    return store, wire, embedder


def _search(store: Any, wire: RankingWire, embedder: HashingEmbedder, **config: Any) -> list[Request]:
    wire.recorder.requests.clear()
    retriever = Retriever(store, embedder, RetrievalConfig(coarse_dim=COARSE, **config))
    _search.result = retriever.search(  # type: ignore[attr-defined]
        SearchRequest("t1", "u1", "Where does Alex live, Lisbon?", explain=True, reference_time=T0)
    )
    return list(wire.recorder.requests)


def _searches(requests: list[Request]) -> list[dict[str, Any]]:
    """The search bodies of the requests: each ``_search``'s, and every body of each ``_msearch``."""
    out: list[dict[str, Any]] = []
    for r in requests:
        if r.path.endswith("/_msearch"):
            out += r.lines[1::2]
        elif r.path.endswith("/_search"):
            out.append(r.body)
    return out


def _answer(result: SearchResult) -> tuple[list[tuple[str, float, dict[str, float]]], float]:
    return [(h.record.id, h.score, h.stages) for h in result.hits], result.evidence


def test_a_search_sends_its_bm25_knn_and_term_count_searches_in_one_msearch(
    wired: tuple[OpenSearchMemoryStore, RankingWire, HashingEmbedder],
) -> None:
    store, wire, embedder = wired
    assert isinstance(store, HybridCandidates) and isinstance(store, HybridWithTermCounts)
    combined = _search(store, wire, embedder)
    together = _search.result  # type: ignore[attr-defined]

    msearches = [r for r in combined if r.path.endswith("/_msearch")]
    assert len(msearches) == 1
    assert [r for r in combined if r.path.endswith("/_search")] == []
    bm25, knn, counts = msearches[0].lines[1::2]
    assert bm25["query"]["bool"]["must"][0]["multi_match"]["query"] == "alex live lisbon"
    assert bm25["size"] == 400 and knn["query"]["knn"]["embedding_coarse"]["k"] == 400
    assert set(counts["aggs"]) == {"t0", "t1", "t2"} and counts["size"] == 0
    # The rest are reads by id (the candidates' vectors and records): no other search.
    assert {r.path for r in combined} == {"/_msearch", f"/{ALIAS}/_mget"}

    alone = _search(OneSearchAtATime(store), wire, embedder)
    separate = _search.result  # type: ignore[attr-defined]
    assert [r for r in alone if r.path.endswith("/_msearch")] == []
    # Asked one at a time, the same three searches go out as three requests.
    assert _searches(alone) == [knn, bm25, counts]

    # Not vacuous: both rankings and the evidence found something.
    assert together.stage_status["vector"] == "ok: 6 candidates"
    assert together.stage_status["bm25"] == "ok: 4 candidates"  # Alex (3 memories), lives (1)
    assert together.hits and 0.0 < together.evidence < 1.0
    assert together.hits[0].stages["query_idf_coverage"] > 0
    assert _answer(together) == _answer(separate)
    assert [h.record.content for h in together.hits[:2]] == [TEXTS[4], TEXTS[0]]


def test_the_bm25_feedback_query_still_goes_alone_and_the_first_one_is_not_sent_again(
    wired: tuple[OpenSearchMemoryStore, RankingWire, HashingEmbedder],
) -> None:
    store, wire, embedder = wired
    feedback = {"prf_terms": 3, "prf_docs": 2, "prf_min_docs": 1}
    combined = _search(store, wire, embedder, **feedback)
    together = _search.result  # type: ignore[attr-defined]
    alone = _search(OneSearchAtATime(store), wire, embedder, **feedback)
    separate = _search.result  # type: ignore[attr-defined]

    first = _searches(combined)[0]["query"]["bool"]["must"][0]["multi_match"]["query"]
    (expanded,) = [r.body for r in combined if r.path.endswith("/_search")]
    assert expanded["query"]["bool"]["must"][0]["multi_match"]["query"] != first
    assert "+" in together.stage_status["bm25"]  # the feedback query ran, with its own terms
    assert len(_searches(alone)) == 4 == len(_searches(combined))
    assert _answer(together) == _answer(separate)
