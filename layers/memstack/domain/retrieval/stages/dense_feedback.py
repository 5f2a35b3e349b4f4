"""Dense feedback (stage 3, after BM25): a second vector search around what the first results are about.

A question that asks for several things ("What books has Melanie read?", "How
many fields did I add to my schema?", "Summarise my chat app's progress") has
its answer spread over turns that share its topic but seldom its words or its
shape: the vector and BM25 stages find the one or two turns nearest to the
question and miss the rest. Rocchio's feedback on embeddings finds them: the
query's vector moved toward the mean of the first ``vector_prf_docs`` vector
and BM25 hits (by ``vector_prf_beta``) is searched again, and its ranking is
fused with the others by weighted RRF (``weight_vector_prf``), so the first
rankings keep their places and the feedback one adds the turns near them.

Applied to every question, it moves single-fact questions off their one right
turn (measured: LoCoMo adversarial @10 0.890 → 0.810), so by default it runs
only for questions that ask for several things (``QueryAnalysis.several_intent``;
``vector_prf_scope``). Measured in docs/retrieval.md, "Dense feedback".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.stages.vector import vector_search
from memstack.models import ScoredId

#: the ranking's name in the fusion (``RetrievalConfig.field_weights``)
VECTOR_PRF = "vector_prf"


def runs_for(search: Search) -> bool:
    """Whether dense feedback runs for this search: switched on, and the question in its scope."""
    cfg = search.config
    if cfg.weight_vector_prf <= 0 or not len(search.query_vec) or not (search.vector or search.bm25):
        return False
    return cfg.vector_prf_scope == "all" or search.query.several_intent


def feedback_ranking(search: Search) -> Sequence[ScoredId]:
    """The vector ranking of the query moved toward its first vector and BM25 hits (none without them)."""
    cfg, req, store = search.config, search.req, search.store
    n = cfg.vector_prf_docs
    head = list(dict.fromkeys([h.id for h in search.vector[:n]] + [h.id for h in search.bm25[:n]]))
    known = {i: search.vectors[i] for i in head if i in search.vectors}
    missing = [i for i in head if i not in known]
    if missing:
        known.update(store.embeddings(req.tenant, req.user_id, missing))
    found = [np.asarray(known[i], dtype=np.float32) for i in head if i in known]
    if not found:
        return []
    q = np.asarray(search.query_vec, dtype=np.float32)
    centroid = np.mean([v / (np.linalg.norm(v) or 1.0) for v in found], axis=0)
    moved = q / (np.linalg.norm(q) or 1.0) + cfg.vector_prf_beta * centroid
    moved = moved / (np.linalg.norm(moved) or 1.0)
    return vector_search(store, req, search.filters, moved, cfg)[0]


#: how much lower each place below the head is than the one above it, at least (relative)
_STEP = 1e-9


def below_head(plain: Mapping[str, float], expanded: Mapping[str, float], keep: int) -> dict[str, float]:
    """Fusion values that rank the plain fusion's first ``keep`` first, at their plain values, and the
    others below them in the expanded fusion's order, each at its expanded value or just below the
    place above it (so values still fall in rank order and stay near their own)."""
    head = sorted(plain, key=lambda i: -plain[i])[:keep]
    out = {i: plain[i] for i in head}
    previous = plain[head[-1]] if head else float("inf")
    kept = set(head)
    for i in sorted((i for i in expanded if i not in kept), key=lambda i: -expanded[i]):
        value = min(expanded[i], previous * (1.0 - _STEP))
        out[i] = previous = value
    return out
