"""Job status in the SQLite file: one row per (tenant, job id), expired rows deleted on the next write."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memstack.adapters.embedded.database import Database
from memstack.ports.job_status import JobChange, JobError, JobStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

_TABLE = (
    """
CREATE TABLE IF NOT EXISTS job_status (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    queued_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (tenant, id)
)""",
    "CREATE INDEX IF NOT EXISTS job_status_user ON job_status (tenant, user_id)",
    "CREATE INDEX IF NOT EXISTS job_status_expiry ON job_status (expires_at)",
)


def _ts(value: datetime) -> float:
    return value.timestamp()


def _dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


class EmbeddedJobStatuses:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        with db.write() as conn:
            for statement in _TABLE:
                conn.execute(statement)

    def put(self, statuses: list[JobStatus]) -> None:
        with self.db.write() as conn:
            # The TTL: what expired goes whenever something new is recorded.
            conn.execute("DELETE FROM job_status WHERE expires_at <= ?", (self.clock(),))
            conn.executemany(
                "INSERT OR REPLACE INTO job_status (tenant, id, user_id, type, state, attempts, error, "
                "queued_at, updated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        s.tenant,
                        s.id,
                        s.user_id,
                        s.type,
                        s.state,
                        s.attempts,
                        s.error.model_dump_json() if s.error else None,
                        _ts(s.queued_at),
                        _ts(s.updated_at),
                        _ts(s.expires_at),
                    )
                    for s in statuses
                ],
            )

    def change(self, tenant: str, user_id: str, job_id: str, change: JobChange) -> bool:
        with self.db.write() as conn:
            return bool(
                conn.execute(
                    "UPDATE job_status SET state = ?, attempts = ?, error = ?, updated_at = ?, "
                    "expires_at = ? WHERE tenant = ? AND id = ? AND user_id = ?",
                    (
                        change.state,
                        change.attempts,
                        change.error.model_dump_json() if change.error else None,
                        _ts(change.updated_at),
                        _ts(change.expires_at),
                        tenant,
                        job_id,
                        user_id,
                    ),
                ).rowcount
            )

    def get(self, tenant: str, job_id: str) -> JobStatus | None:
        row = (
            self.db.read()
            .execute("SELECT * FROM job_status WHERE tenant = ? AND id = ?", (tenant, job_id))
            .fetchone()
        )
        if row is None:
            return None
        return JobStatus(
            id=row["id"],
            tenant=row["tenant"],
            user_id=row["user_id"],
            type=row["type"],
            state=row["state"],
            attempts=row["attempts"],
            error=JobError.model_validate(json.loads(row["error"])) if row["error"] else None,
            queued_at=_dt(row["queued_at"]),
            updated_at=_dt(row["updated_at"]),
            expires_at=_dt(row["expires_at"]),
        )

    def erase_user(self, tenant: str, user_id: str) -> int:
        with self.db.write() as conn:
            return int(
                conn.execute(
                    "DELETE FROM job_status WHERE tenant = ? AND user_id = ?", (tenant, user_id)
                ).rowcount
            )


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> EmbeddedJobStatuses:
    """Job status beside the embedded STM, in the SQLite file (``factory.JOB_STATUSES``)."""
    assert db is not None, "embedded job status needs the data file open"
    return EmbeddedJobStatuses(db)
