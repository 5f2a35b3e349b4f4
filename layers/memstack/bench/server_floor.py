"""The PostgreSQL floor: the store's two search statements in their least form, on the same server.

``floor.py`` is the least any search over the user's rows can cost in this
process (numpy + FTS5). A store on a database server also pays for the
server: so ``memstack bench search --backend postgres`` measures, query by
query in the same run, the same server answering the minimal forms of the
store's own two candidate statements over the same table and rows:

- **exact vector top-k**: the user's coarse vectors ranked by cosine
  distance, every row of the user (no index: ``+ 0`` keeps the planner off
  the HNSW index, which would be approximate), the 200 nearest ids;
- **a GIN tsvector match**: the ids of the user's rows whose text holds any
  of the query's words (the same stemmed lexemes the store's BM25 statement
  searches for), through the GIN index, unranked.

Both go through the store's own executor (same connection pool, same round
trips); the figure is their sum.
"""

from __future__ import annotations

import time

import numpy as np

from memstack.adapters.postgres.executor import vector_text
from memstack.adapters.postgres.search import lexeme_query
from memstack.adapters.postgres.store import PostgresMemoryStore
from memstack.domain.text import query_terms
from memstack.domain.vectors import coarse_prefix


class ServerFloor:
    def __init__(self, store: PostgresMemoryStore, tenant: str, user_id: str, k: int = 200) -> None:
        self.store, self.k = store, k
        self.owner = {"tenant": tenant, "user_id": user_id}
        schema = store.schema
        self._vector = f"""SELECT m.id FROM {schema}.memories m
            WHERE m.tenant = :tenant AND m.user_id = :user_id AND m.embedding_coarse IS NOT NULL
            ORDER BY (m.embedding_coarse <=> CAST(:q AS vector)) + 0 LIMIT :k"""
        self._match = f"""SELECT m.id FROM {schema}.memories m
            WHERE m.tenant = :tenant AND m.user_id = :user_id AND m.tsv @@ ({lexeme_query(schema)})"""

    def answers(self, query_vec: np.ndarray, query: str) -> tuple[list[str], list[str]]:
        """(the ``k`` nearest ids by coarse cosine, nearest first; the ids of every matching row)."""
        q = vector_text(coarse_prefix(query_vec, self.store.coarse_dim))
        terms = " ".join(query_terms(query))
        nearest = self.store.executor.query(self._vector, {**self.owner, "q": q, "k": self.k})
        matched = self.store.executor.query(self._match, {**self.owner, "terms": terms}) if terms else []
        return [r["id"] for r in nearest], [r["id"] for r in matched]

    def search(self, query_vec: np.ndarray, query: str) -> float:
        """Milliseconds for both statements of one query (the query vector cut to the coarse prefix)."""
        started = time.perf_counter()
        self.answers(query_vec, query)
        return (time.perf_counter() - started) * 1000
