"""The embedded short-term store: the ``stm`` table of the SQLite file.

Expired rows are invisible to every read (``expires_at`` is checked in SQL)
and removed by ``purge_expired``, the housekeeping pass the consolidation
scheduler runs before it looks for work. The ``extraction`` column is the
outbox: "pending" from the write until an extraction job finishes ("done").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.migrations import ensure_columns
from memstack.adapters.embedded.store import ensure_erasures, erased_at
from memstack.domain.erasure import Fence, refuse_if_erased
from memstack.models import Message
from memstack.ports.stm import StmEntry

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings


def _entry(row: object) -> StmEntry:
    r = row  # sqlite3.Row
    return StmEntry(
        tenant=r["tenant"],  # type: ignore[index]
        user_id=r["user_id"],  # type: ignore[index]
        session_id=r["session_id"],  # type: ignore[index]
        scope=r["scope"],  # type: ignore[index]
        message=Message.model_validate_json(r["message"]),  # type: ignore[index]
        received_at=datetime.fromtimestamp(r["received_at"], UTC),  # type: ignore[index]
        expires_at=r["expires_at"],  # type: ignore[index]
        consolidated=bool(r["consolidated"]),  # type: ignore[index]
        extraction=r["extraction"],  # type: ignore[index]
    )


def _chunks(message_ids: list[str]) -> Iterator[list[str]]:
    """``message_ids`` in slices small enough for one statement's parameters."""
    for start in range(0, len(message_ids), 500):
        yield message_ids[start : start + 500]


def _marks(chunk: list[str]) -> str:
    return ",".join("?" * len(chunk))


class EmbeddedShortTermStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        # ``claim``: the token of the add that stored the entry and may still take it back (NULL: kept)
        ensure_columns(db, "stm", {"extraction": "TEXT NOT NULL DEFAULT 'none'", "claim": "TEXT"})
        ensure_erasures(db)

    def append(
        self, entries: list[StmEntry], *, fence: Fence | None = None, claim: str | None = None
    ) -> list[str]:
        stored: list[str] = []
        with self.db.write() as conn:
            if fence is not None:  # an add that began before an erase of its user stores nothing
                for tenant, user_id in dict.fromkeys((e.tenant, e.user_id) for e in entries):
                    refuse_if_erased(fence, erased_at(conn, tenant, user_id))
            for e in entries:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO stm (tenant, user_id, message_id, session_id, scope, received_at, "
                    "expires_at, consolidated, message, extraction, claim) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        e.tenant,
                        e.user_id,
                        e.message.id,
                        e.session_id,
                        str(e.scope),
                        e.received_at.timestamp(),
                        e.expires_at,
                        int(e.consolidated),
                        e.message.model_dump_json(),
                        e.extraction,
                        claim,
                    ),
                )
                if cur.rowcount:
                    stored.append(e.message.id)
        return stored

    def withdraw(self, tenant: str, user_id: str, message_ids: list[str], claim: str) -> int:
        withdrawn = 0
        with self.db.write() as conn:
            for chunk in _chunks(message_ids):
                withdrawn += conn.execute(
                    "DELETE FROM stm WHERE tenant = ? AND user_id = ? AND claim = ? "
                    f"AND message_id IN ({_marks(chunk)})",
                    (tenant, user_id, claim, *chunk),
                ).rowcount
        return withdrawn

    def adopt(self, tenant: str, user_id: str, message_ids: list[str]) -> list[str]:
        present: set[str] = set()
        with self.db.write() as conn:  # read and release in one transaction: no withdraw in between
            for chunk in _chunks(message_ids):
                where = f"tenant = ? AND user_id = ? AND message_id IN ({_marks(chunk)})"
                rows = conn.execute(f"SELECT message_id FROM stm WHERE {where}", (tenant, user_id, *chunk))
                present.update(r["message_id"] for r in rows)
                conn.execute(
                    f"UPDATE stm SET claim = NULL WHERE claim IS NOT NULL AND {where}",
                    (tenant, user_id, *chunk),
                )
        return [m for m in dict.fromkeys(message_ids) if m not in present]

    def get(self, tenant: str, user_id: str, message_id: str) -> StmEntry | None:
        row = (
            self.db.read()
            .execute(
                "SELECT * FROM stm WHERE tenant = ? AND user_id = ? AND message_id = ? AND expires_at > ?",
                (tenant, user_id, message_id, int(time.time())),
            )
            .fetchone()
        )
        return _entry(row) if row else None

    def unextracted(self, tenant: str, user_id: str, message_ids: list[str]) -> dict[str, datetime]:
        out: dict[str, datetime] = {}
        conn = self.db.read()
        for chunk in _chunks(message_ids):
            rows = conn.execute(
                "SELECT message_id, received_at FROM stm WHERE tenant = ? AND user_id = ? "
                f"AND extraction = 'pending' AND message_id IN ({_marks(chunk)})",
                (tenant, user_id, *chunk),
            )
            out.update({r["message_id"]: datetime.fromtimestamp(r["received_at"], UTC) for r in rows})
        return out

    def stale_pending(
        self, since: datetime, before: datetime, now: datetime, limit: int
    ) -> list[tuple[str, str, str, datetime]]:
        rows = self.db.read().execute(
            "SELECT tenant, user_id, message_id, received_at FROM stm WHERE extraction = 'pending' "
            "AND received_at >= ? AND received_at < ? AND expires_at > ? ORDER BY received_at, rowid LIMIT ?",
            (since.timestamp(), before.timestamp(), int(now.timestamp()), limit),
        )
        return [
            (r["tenant"], r["user_id"], r["message_id"], datetime.fromtimestamp(r["received_at"], UTC))
            for r in rows
        ]

    def mark_extracted(self, tenant: str, user_id: str, message_ids: list[str]) -> int:
        with self.db.write() as conn:
            return sum(
                conn.execute(
                    "UPDATE stm SET extraction = 'done' WHERE tenant = ? AND user_id = ? AND message_id = ? "
                    "AND extraction = 'pending'",
                    (tenant, user_id, mid),
                ).rowcount
                for mid in message_ids
            )

    def unconsolidated(
        self, tenant: str, user_id: str, now: datetime, limit: int | None = None
    ) -> list[StmEntry]:
        rows = (
            self.db.read()
            .execute(
                "SELECT * FROM stm WHERE tenant = ? AND user_id = ? AND consolidated = 0 AND expires_at > ? "
                "ORDER BY received_at, rowid LIMIT ?",
                (tenant, user_id, int(now.timestamp()), -1 if limit is None else limit),
            )
            .fetchall()
        )
        return [_entry(r) for r in rows]

    def mark_consolidated(self, tenant: str, user_id: str, message_ids: list[str]) -> int:
        with self.db.write() as conn:
            changed = 0
            for mid in message_ids:
                changed += conn.execute(
                    "UPDATE stm SET consolidated = 1 WHERE tenant = ? AND user_id = ? AND message_id = ? "
                    "AND consolidated = 0",
                    (tenant, user_id, mid),
                ).rowcount
        return changed

    def users_with_pending(self, now: datetime) -> list[tuple[str, str, int, datetime]]:
        rows = (
            self.db.read()
            .execute(
                "SELECT tenant, user_id, COUNT(*) AS n, MIN(received_at) AS oldest FROM stm "
                "WHERE consolidated = 0 AND expires_at > ? GROUP BY tenant, user_id",
                (int(now.timestamp()),),
            )
            .fetchall()
        )
        return [(r["tenant"], r["user_id"], r["n"], datetime.fromtimestamp(r["oldest"], UTC)) for r in rows]

    def erase_user(self, tenant: str, user_id: str) -> int:
        with self.db.write() as conn:
            return conn.execute(
                "DELETE FROM stm WHERE tenant = ? AND user_id = ?", (tenant, user_id)
            ).rowcount

    def purge_expired(self, now: datetime) -> int:
        with self.db.write() as conn:
            return conn.execute("DELETE FROM stm WHERE expires_at <= ?", (int(now.timestamp()),)).rowcount


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> EmbeddedShortTermStore:
    """``MEMSTACK_STM_BACKEND=embedded``: the SQLite file (``factory.STMS``)."""
    assert db is not None, "the embedded STM needs the data file open"
    return EmbeddedShortTermStore(db)
