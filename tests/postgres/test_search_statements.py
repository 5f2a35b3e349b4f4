"""The statements one search sends to PostgreSQL: the evidence's term counts ride in the BM25 statement.

A whole search through the real pipeline on the real store, with every statement
the executor runs recorded: the search must send no statement of its own for the
term counts, and answer exactly what it answers when the store lacks the combined
statement (``Bm25WithTermCounts``) and is asked one search at a time.
"""

from __future__ import annotations

from typing import Any

import pytest
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.ports.store import Bm25WithTermCounts, implements

from tests.adapters.test_opensearch_search_round_trips import T0, TEXTS

from .conftest import COARSE_DIM, EMB, record, record_statements


class Separately:
    """The store without its combined statement: the pipeline asks BM25 and the counts apart."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "bm25_with_counts":
            raise AttributeError(name)
        return getattr(self._store, name)


def _search(store: Any, statements: list[str]) -> SearchResult:
    statements.clear()
    retriever = Retriever(store, EMB, RetrievalConfig(coarse_dim=COARSE_DIM))
    return retriever.search(SearchRequest("t1", "u1", "Where does Alex live, Lisbon?", reference_time=T0))


@pytest.fixture
def recorded(make_store: Any) -> tuple[Any, list[str]]:
    store = make_store()
    store.put([record(text) for text in TEXTS])
    return store, record_statements(store)


def test_a_search_sends_no_statement_of_its_own_for_the_term_counts(recorded: tuple[Any, list[str]]) -> None:
    store, statements = recorded
    assert implements(store, Bm25WithTermCounts) and not implements(Separately(store), Bm25WithTermCounts)
    apart = _search(Separately(store), statements)
    apart_statements = list(statements)
    together = _search(store, statements)
    counts_alone = [s for s in apart_statements if "WITH stats AS (SELECT" in s]
    assert len(counts_alone) == 1 and not any("WITH stats AS (SELECT" in s for s in statements)
    assert len(statements) == len(apart_statements) - 1
    assert [(h.record.id, h.score) for h in together.hits] == [(h.record.id, h.score) for h in apart.hits]
    assert together.hits and together.evidence == apart.evidence
