"""Fixtures of the PostgreSQL-specific tests: stores on the session server, an admin connection."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.adapters.postgres.connect import SESSION_SETTINGS
from memstack.adapters.postgres.devserver import DevPostgres
from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor
from memstack.adapters.postgres.store import PostgresMemoryStore
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryRecord

COARSE_DIM = 16
EMB = HashingEmbedder(64)


def record(content: str, tenant: str = "t1", user: str = "u1", **fields: Any) -> MemoryRecord:
    """A memory of ``user`` with hashing-embedder vectors (64-d full, 16-d coarse)."""
    vec = EMB.embed([content])[0]
    return MemoryRecord(
        tenant=tenant,
        user_id=user,
        content=content,
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, COARSE_DIM).tolist(),
        **fields,
    )


def service_settings(data_dir: Any, server: DevPostgres, schema: str, **extra: Any) -> Any:
    """Settings of a whole service on the test's schema (hashing embedder, data dir for the rest)."""
    from memstack.settings import load_settings

    return load_settings(
        data_dir=data_dir,
        embedder="hashing",
        store_backend="postgres",
        postgres_dsn=server.dsn,
        postgres_schema=schema,
        **extra,
    )


@pytest.fixture
def admin(postgres_server: DevPostgres) -> Iterator[psycopg.Connection[Any]]:
    """A separate autocommit connection, for what the test does behind the store's back."""
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def make_store(
    postgres_server: DevPostgres, postgres_schema: str
) -> Iterator[Callable[..., PostgresMemoryStore]]:
    """Stores on the test's schema, each with its own connection pool; all closed afterwards."""
    stores: list[PostgresMemoryStore] = []

    def make(**kwargs: Any) -> PostgresMemoryStore:
        executor = PsycopgExecutor(postgres_server.dsn, max_size=2, session_settings=SESSION_SETTINGS)
        store = PostgresMemoryStore(executor, schema=postgres_schema, coarse_dim=COARSE_DIM, **kwargs)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


def backends_waiting_on_lock(admin: psycopg.Connection[Any]) -> list[int]:
    """Pids of other sessions blocked on a lock right now."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    ).fetchall()
    return [r[0] for r in rows]


def record_statements(store: PostgresMemoryStore) -> list[str]:
    """The SQL of every statement the store's executor runs from now on, in order (the list fills)."""
    statements: list[str] = []
    query = store.executor.query

    def recording(sql: str, params: Any = None) -> Any:
        statements.append(sql)
        return query(sql, params)

    store.executor.query = recording  # type: ignore[method-assign]
    return statements
