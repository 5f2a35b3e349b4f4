"""``SqlExecutor`` on a direct connection: psycopg 3 with a small connection pool.

Statements are prepared by psycopg after a few executions on a connection
(``prepare_threshold``), which is all "prepared statements" needs here.
A connection that sat idle for a while is checked before it is handed out,
so a server restart or an idle connection the network dropped costs a
reconnect, not a failed request (a connection in steady use is not, which
saves a round trip per statement); a connection that breaks *during* a
request becomes ``StoreUnavailable`` (a 503 the client may retry) and the
pool replaces it.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from memstack.adapters.postgres.executor import DuplicateKey, Params, Row, SqlExecutor, StoreUnavailable

#: a connection idle longer than this is checked before use
CHECK_AFTER_IDLE_SECONDS = 5.0
# ``:name`` but not the second colon of a ``::type`` cast.
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=256)
def pyformat(sql: str) -> str:
    """The statement in psycopg's ``%(name)s`` style (literal ``%`` doubled)."""
    return _PLACEHOLDER.sub(r"%(\1)s", sql.replace("%", "%%"))


@contextmanager
def _translated_errors() -> Iterator[None]:
    try:
        yield
    except psycopg.errors.UniqueViolation as exc:
        raise DuplicateKey(str(exc)) from exc
    except PoolTimeout as exc:
        raise StoreUnavailable("no database connection became free in time") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        # Lost or refused connections, administrator shutdowns, statement
        # timeouts, deadlocks: all worth a retry, none a caller's mistake.
        raise StoreUnavailable(type(exc).__name__) from exc


def _run(conn: psycopg.Connection[Any], sql: str, params: Params | None) -> list[Row]:
    with conn.cursor(row_factory=dict_row) as cur:
        if params is None:
            cur.execute(sql)
        else:
            cur.execute(pyformat(sql), dict(params))
        return cur.fetchall() if cur.description is not None else []


class _ConnectionExecutor:
    """The executor inside one transaction: every statement on the same connection."""

    max_request_bytes: int | None = None
    max_result_bytes: int | None = None

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        with _translated_errors():
            return _run(self.conn, sql, params)

    @contextmanager
    def transaction(self) -> Iterator[SqlExecutor]:
        with _translated_errors(), self.conn.transaction():  # a savepoint
            yield self

    def close(self) -> None:
        pass


class _IdleCheck:
    """The pool's ``check`` and ``reset`` hooks: check a connection only after it sat idle."""

    def __init__(self, after_seconds: float) -> None:
        self.after_seconds = after_seconds
        self._returned: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )

    def returned(self, conn: psycopg.Connection[Any]) -> None:
        self._returned[conn] = time.monotonic()

    def check(self, conn: psycopg.Connection[Any]) -> None:
        last = self._returned.get(conn)
        if last is None or time.monotonic() - last > self.after_seconds:
            ConnectionPool.check_connection(conn)


class PsycopgExecutor:
    """A pool of 1..``max_size`` autocommit connections to ``dsn``."""

    max_request_bytes: int | None = None
    max_result_bytes: int | None = None

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int = 4,
        connect_timeout: float = 10.0,
        session_settings: dict[str, str] | None = None,
    ) -> None:
        options = " ".join(f"-c {name}={value}" for name, value in (session_settings or {}).items())
        kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 2}
        if options:
            kwargs["options"] = options
        idle = _IdleCheck(CHECK_AFTER_IDLE_SECONDS)
        self._pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max_size,
            kwargs=kwargs,
            open=False,
            check=idle.check,
            reset=idle.returned,
            timeout=connect_timeout,
            num_workers=1,
            name="memstack-postgres",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailable(f"could not connect within {connect_timeout:g} s") from exc

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        with _translated_errors(), self._pool.connection() as conn:
            return _run(conn, sql, params)

    @contextmanager
    def transaction(self) -> Iterator[SqlExecutor]:
        with _translated_errors(), self._pool.connection() as conn, conn.transaction():
            yield _ConnectionExecutor(conn)

    def close(self) -> None:
        self._pool.close()
