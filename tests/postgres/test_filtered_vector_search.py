"""The coarse vector pass keeps returning k when a filter removes most rows.

The user has 2,000 rows, of which 40 are LTM; another user has 1,000 more.
An HNSW scan that stops early (a small ``hnsw.max_scan_tuples``) finds too
few LTM rows; the statement must notice and answer from an exact scan, so a
filtered search is still the exact top k of the rows that match.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from memstack.adapters.postgres import search
from memstack.adapters.postgres.connect import SESSION_SETTINGS
from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor, pyformat
from memstack.adapters.postgres.store import PostgresMemoryStore
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord, Tier

from .conftest import COARSE_DIM

FULL_DIM = 32
LTM_ROWS = 40
K = 20


def _records(rng: np.random.Generator, user: str, n: int, ltm: int = 0) -> list[MemoryRecord]:
    out = []
    for i in range(n):
        full = rng.normal(size=FULL_DIM).astype(np.float32)
        out.append(
            MemoryRecord(
                tenant="t1",
                user_id=user,
                content=f"row {i}",
                tier=Tier.LTM if i < ltm else Tier.STM,
                embedding_full=full.tolist(),
                embedding_coarse=coarse_prefix(full, COARSE_DIM).tolist(),
            )
        )
    return out


@pytest.fixture(scope="module")
def loaded(postgres_server: Any) -> Iterator[tuple[Any, list[MemoryRecord], np.ndarray]]:
    """One filled schema for the module's tests (filling is the slow part)."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    store = PostgresMemoryStore(
        PsycopgExecutor(postgres_server.dsn, max_size=1), schema=schema, coarse_dim=COARSE_DIM
    )
    rng = np.random.default_rng(7)
    mine = _records(rng, "u1", 2000, ltm=LTM_ROWS)
    store.put(mine)
    store.put(_records(rng, "u2", 1000, ltm=1000))
    store.executor.query(f"ANALYZE {schema}.memories")
    query = coarse_prefix(rng.normal(size=FULL_DIM).astype(np.float32), COARSE_DIM)
    yield store, mine, query
    store.close()
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _brute_force(records: list[MemoryRecord], query: np.ndarray, k: int) -> list[str]:
    matrix = np.asarray([r.embedding_coarse for r in records], dtype=np.float32)
    order = np.argsort(-(matrix @ query), kind="stable")[:k]
    return [records[i].id for i in order]


# Make the planner take the HNSW index (small tables would otherwise be scanned),
# and give the index scan a budget far too small to find 20 of 40 rows in 5,000.
HNSW_UNDER_PRESSURE = {
    "hnsw.iterative_scan": "relaxed_order",
    "hnsw.max_scan_tuples": "200",
    "enable_seqscan": "off",
    "enable_sort": "off",
}


def _plan(admin: Any, store: Any, query: np.ndarray, filters: MemoryFilters) -> tuple[int, bool]:
    """(rows the HNSW index scan returned, whether the exact scan ran) for this search."""
    for name, value in HNSW_UNDER_PRESSURE.items():
        admin.execute(f"SET {name} = '{value}'")
    sql, params = search.vector_sql(store.schema, query, K, filters, exact_below=0)
    params.update(tenant="t1", user_id="u1")
    lines = [r[0] for r in admin.execute("EXPLAIN (ANALYZE, COSTS OFF) " + pyformat(sql), params)]
    hnsw = [line for line in lines if "using memories_coarse_hnsw" in line]
    assert len(hnsw) == 1, "the planner did not use the HNSW index"
    found = re.search(r"rows=(\d+)", hnsw[0])
    # Every other scan of the table but the size probe (index-only) is the exact branch.
    exact = [
        line
        for line in lines
        if re.search(r"Scan .*on memories \w+ \(", line) and line not in hnsw and "Index Only" not in line
    ]
    return int(found.group(1)) if found else 0, any("never executed" not in line for line in exact)


def test_a_filter_that_removes_most_rows_still_returns_the_exact_top_k(
    loaded: Any, postgres_server: Any
) -> None:
    store, mine, query = loaded
    ltm = [r for r in mine if r.tier == Tier.LTM]
    expected = _brute_force(ltm, query, K)
    for exact_below in (0, 10_000):  # the HNSW path, and the exact path of a small user
        probe = PostgresMemoryStore(
            PsycopgExecutor(postgres_server.dsn, max_size=1, session_settings=SESSION_SETTINGS),
            schema=store.schema,
            coarse_dim=COARSE_DIM,
            exact_below=exact_below,
            migrate_on_start=False,
        )
        try:
            hits = probe.vector_search("t1", "u1", query, K, MemoryFilters(tier=Tier.LTM))
        finally:
            probe.close()
        assert [h.id for h in hits] == expected
        assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))


def test_a_starved_hnsw_scan_falls_back_to_an_exact_scan(
    loaded: Any, admin: Any, postgres_server: Any
) -> None:
    store, mine, query = loaded
    # The graph was searched and came back short of k; then the exact branch ran.
    hnsw_rows, exact_ran = _plan(admin, store, query, MemoryFilters(tier=Tier.LTM))
    assert hnsw_rows < K and exact_ran
    starved = PostgresMemoryStore(
        PsycopgExecutor(postgres_server.dsn, max_size=1, session_settings=HNSW_UNDER_PRESSURE),
        schema=store.schema,
        coarse_dim=COARSE_DIM,
        exact_below=0,
        migrate_on_start=False,
    )
    try:
        hits = starved.vector_search("t1", "u1", query, K, MemoryFilters(tier=Tier.LTM))
        ltm = [r for r in mine if r.tier == Tier.LTM]
        assert [h.id for h in hits] == _brute_force(ltm, query, K)
        # Without a filter the graph alone finds k rows: no exact scan is needed.
        unfiltered = starved.vector_search("t1", "u1", query, K, MemoryFilters())
        assert len(unfiltered) == K
        assert len({h.id for h in unfiltered}) == K
        assert all(unfiltered[i].score >= unfiltered[i + 1].score for i in range(K - 1))
    finally:
        starved.close()
    hnsw_rows, exact_ran = _plan(admin, store, query, MemoryFilters())
    assert hnsw_rows == K and not exact_ran


def _rescored_here(
    store: PostgresMemoryStore, query: np.ndarray, full: np.ndarray
) -> list[tuple[str, float]]:
    """What stage 2 made of ``vector_search`` and ``embeddings`` before the store ranked them itself."""
    hits = store.vector_search("t1", "u1", query, K, MemoryFilters(tier=Tier.LTM))
    vectors = store.embeddings("t1", "u1", [h.id for h in hits])
    scores = np.asarray([vectors[h.id] for h in hits], dtype=np.float32) @ full
    order = np.argsort(-scores, kind="stable")
    return [(hits[i].id, float(scores[i])) for i in order]


def test_rescoring_on_the_server_ranks_as_stage_two_did_on_every_path(
    loaded: Any, postgres_server: Any
) -> None:
    store, _, _ = loaded
    rng = np.random.default_rng(3)
    full = rng.normal(size=FULL_DIM).astype(np.float32)
    query = coarse_prefix(full, COARSE_DIM)
    # The index scan scores the rows it returns; the exact scan of a small user, and the one a
    # starved index scan falls back to, have theirs scored after their LIMIT.
    paths = [(0, SESSION_SETTINGS), (10_000, SESSION_SETTINGS), (0, HNSW_UNDER_PRESSURE)]
    for exact_below, settings in paths:
        probe = PostgresMemoryStore(
            PsycopgExecutor(postgres_server.dsn, max_size=1, session_settings=settings),
            schema=store.schema,
            coarse_dim=COARSE_DIM,
            exact_below=exact_below,
            migrate_on_start=False,
        )
        try:
            rescored = probe.rescored_candidates("t1", "u1", query, full, K, MemoryFilters(tier=Tier.LTM))
            expected = _rescored_here(probe, query, full)
        finally:
            probe.close()
        assert [h.id for h in rescored] == [i for i, _ in expected], (exact_below, settings)
        np.testing.assert_allclose([h.score for h in rescored], [s for _, s in expected], atol=1e-5)
