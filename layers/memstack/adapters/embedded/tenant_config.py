"""Tenants' configurations in the SQLite file: one row of the ``kv`` table per tenant.

Namespace ``tenant_config``, key the tenant, value ``{"version", "updated_at",
"document"}`` as JSON. A write reads the version and replaces the row in one
``BEGIN IMMEDIATE`` transaction, so the compare-and-set holds across threads
and processes sharing the file.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.errors import Conflict
from memstack.ports.tenant_config import NO_CONFIG, StoredConfig

NAMESPACE = "tenant_config"


def _stored(value: str) -> StoredConfig:
    data = json.loads(value)
    return StoredConfig(
        document=data["document"],
        version=int(data["version"]),
        updated_at=datetime.fromisoformat(data["updated_at"]),
    )


class EmbeddedTenantConfigStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, tenant: str) -> StoredConfig:
        row = (
            self.db.read()
            .execute("SELECT value FROM kv WHERE namespace = ? AND key = ?", (NAMESPACE, tenant))
            .fetchone()
        )
        return NO_CONFIG if row is None else _stored(row["value"])

    def put(
        self, tenant: str, document: dict[str, Any], expected_version: int, now: datetime
    ) -> StoredConfig:
        stored = StoredConfig(document=document, version=expected_version + 1, updated_at=now)
        value = json.dumps(
            {"version": stored.version, "updated_at": now.isoformat(), "document": document},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT value FROM kv WHERE namespace = ? AND key = ?", (NAMESPACE, tenant)
            ).fetchone()
            found = 0 if row is None else _stored(row["value"]).version
            if found != expected_version:
                raise Conflict(f"the configuration is at version {found}, not {expected_version}")
            conn.execute(
                "INSERT OR REPLACE INTO kv (namespace, key, value, expires_at) VALUES (?, ?, ?, NULL)",
                (NAMESPACE, tenant, value),
            )
        return stored
