"""``adapters.postgres.where``: each conformance expression, run by PostgreSQL, keeps what the domain keeps.

The rows sit in a plain table with the columns the translation reads (no
vector column), so this checks the SQL itself on the server, through both
executors (psycopg, and the Data API's typed parameters).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from memstack.adapters.postgres.connect import SESSION_SETTINGS
from memstack.adapters.postgres.data_api_executor import DataApiExecutor
from memstack.adapters.postgres.devserver import DevPostgres
from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor
from memstack.adapters.postgres.where import where_sql
from memstack.domain import filter_expr
from memstack.models import MemoryRecord

from tests.conformance.test_filter_expressions import CASES, NOTES
from tests.conformance.test_store_conformance import T0
from tests.data_api_emulator import DataApiEmulator

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:memstack-db-AbCdEf"


def _records() -> list[MemoryRecord]:
    return [
        MemoryRecord(
            tenant="t1",
            user_id="u1",
            content=content,
            metadata=metadata,
            kind=kind,
            category=category,
            created_at=T0 + timedelta(minutes=minutes),
            event_time=None if days is None else T0 + timedelta(days=days),
        )
        for content, metadata, kind, category, minutes, days in NOTES
    ]


@pytest.fixture(params=["psycopg", "data-api"])
def executor(
    request: pytest.FixtureRequest, postgres_server: DevPostgres, postgres_schema: str
) -> Iterator[Any]:
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {postgres_schema}")
        conn.execute(
            f"CREATE TABLE {postgres_schema}.notes (content text, metadata jsonb NOT NULL, "
            "kind text NOT NULL, category text, created_at timestamptz NOT NULL, event_time timestamptz)"
        )
        for r in _records():
            conn.execute(
                f"INSERT INTO {postgres_schema}.notes VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    r.content,
                    json.dumps(r.metadata),
                    str(r.kind),
                    r.category and str(r.category),
                    r.created_at,
                    r.event_time,
                ),
            )
    if request.param == "psycopg":
        ex: Any = PsycopgExecutor(postgres_server.dsn, max_size=1, session_settings=SESSION_SETTINGS)
        yield ex
        ex.close()
    else:
        client = DataApiEmulator(postgres_server.dsn)
        ex = DataApiExecutor(
            "arn:aws:rds:us-east-1:123456789012:cluster:memstack", SECRET_ARN, "postgres", client=client
        )
        yield ex
        ex.close()
        client.close()


@pytest.mark.parametrize("raw", CASES.values(), ids=CASES.keys())
def test_the_sql_of_each_expression_keeps_what_the_domain_keeps(
    executor: Any, postgres_schema: str, raw: Any
) -> None:
    expr = filter_expr.parse(raw)
    condition, params = where_sql(expr)
    rows = executor.query(f"SELECT m.content FROM {postgres_schema}.notes m WHERE {condition}", params)
    assert {row["content"] for row in rows} == {
        r.content for r in _records() if filter_expr.evaluate(expr, r)
    }
