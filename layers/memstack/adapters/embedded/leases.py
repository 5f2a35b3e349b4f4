"""Leases in the SQLite file: rows of the ``kv`` table (namespace ``lease``), one transaction each."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memstack.adapters.embedded.database import Database

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

NAMESPACE = "lease"


def _key(tenant: str, user_id: str, name: str) -> str:
    return f"{tenant}\x1f{user_id}\x1f{name}"


class EmbeddedLeases:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def acquire(self, tenant: str, user_id: str, name: str, owner: str, seconds: float) -> bool:
        now = self.clock()
        key = _key(tenant, user_id, name)
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT value, expires_at FROM kv WHERE namespace = ? AND key = ?", (NAMESPACE, key)
            ).fetchone()
            if row is not None and row["value"] != owner and (row["expires_at"] or 0) > now:
                return False
            conn.execute(
                "INSERT OR REPLACE INTO kv (namespace, key, value, expires_at) VALUES (?, ?, ?, ?)",
                (NAMESPACE, key, owner, now + seconds),
            )
        return True

    def renew(self, tenant: str, user_id: str, name: str, owner: str, seconds: float) -> bool:
        with self.db.write() as conn:
            return bool(
                conn.execute(
                    "UPDATE kv SET expires_at = ? WHERE namespace = ? AND key = ? AND value = ?",
                    (self.clock() + seconds, NAMESPACE, _key(tenant, user_id, name), owner),
                ).rowcount
            )

    def release(self, tenant: str, user_id: str, name: str, owner: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                "DELETE FROM kv WHERE namespace = ? AND key = ? AND value = ?",
                (NAMESPACE, _key(tenant, user_id, name), owner),
            )

    def erase_user(self, tenant: str, user_id: str) -> int:
        prefix = _key(tenant, user_id, "")
        with self.db.write() as conn:
            return int(
                conn.execute(
                    "DELETE FROM kv WHERE namespace = ? AND substr(key, 1, ?) = ?",
                    (NAMESPACE, len(prefix), prefix),
                ).rowcount
            )


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> EmbeddedLeases:
    """Leases beside the embedded STM, in the SQLite file (``factory.LEASES``)."""
    assert db is not None, "embedded leases need the data file open"
    return EmbeddedLeases(db)
