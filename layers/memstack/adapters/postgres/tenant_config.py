"""Tenants' configurations in PostgreSQL: ``{schema}.tenant_config``, one row per tenant (migration 6).

A write is one statement: the first an ``INSERT ... ON CONFLICT DO NOTHING``,
later ones an ``UPDATE`` conditioned on the version read; no row back means
another write won (``Conflict``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memstack.adapters.postgres.executor import SqlExecutor, json_text
from memstack.adapters.postgres.records import from_micros, micros, micros_sql, time_sql
from memstack.errors import Conflict
from memstack.ports.tenant_config import NO_CONFIG, StoredConfig


class PostgresTenantConfigStore:
    def __init__(self, executor: SqlExecutor, schema: str) -> None:
        self.executor = executor
        self.table = f"{schema}.tenant_config"

    def get(self, tenant: str) -> StoredConfig:
        rows = self.executor.query(
            f"SELECT document::text AS document, version, {time_sql('updated_at')} AS updated_at "
            f"FROM {self.table} WHERE tenant = :tenant",
            {"tenant": tenant},
        )
        if not rows:
            return NO_CONFIG
        row = rows[0]
        return StoredConfig(
            document=json.loads(row["document"]),
            version=int(row["version"]),
            updated_at=from_micros(row["updated_at"]),
        )

    def put(
        self, tenant: str, document: dict[str, Any], expected_version: int, now: datetime
    ) -> StoredConfig:
        params: dict[str, str | int | None] = {
            "tenant": tenant,
            "document": json_text(document),
            "expected": expected_version,
            "updated_at": micros(now),
        }
        if expected_version == 0:
            sql = (
                f"INSERT INTO {self.table} (tenant, document, version, updated_at) "
                f"VALUES (:tenant, CAST(:document AS jsonb), :expected + 1, {micros_sql(':updated_at')}) "
                "ON CONFLICT (tenant) DO NOTHING RETURNING version"
            )
        else:
            sql = (
                f"UPDATE {self.table} SET document = CAST(:document AS jsonb), version = version + 1, "
                f"updated_at = {micros_sql(':updated_at')} "
                "WHERE tenant = :tenant AND version = :expected RETURNING version"
            )
        rows = self.executor.query(sql, params)
        if not rows:
            raise Conflict(f"the configuration is no longer at version {expected_version}")
        return StoredConfig(document=document, version=int(rows[0]["version"]), updated_at=now)
