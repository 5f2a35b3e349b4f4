"""The small SQL interface the PostgreSQL store runs on, and what both implementations share.

The store writes each statement once, with ``:name`` placeholders (the RDS
Data API's own style), and talks only to a ``SqlExecutor``: a direct psycopg
connection pool (``psycopg_executor``) or the RDS Data API over HTTPS
(``data_api_executor``). To keep the two interchangeable the statements only
exchange portable scalars: parameters are ``str``, ``int``, ``float``,
``bool``, ``bytes`` or ``None`` (vectors and JSON travel as text and are cast
in SQL), and every selected column is text, an integer, a float8, a boolean
or a bytea (times as epoch seconds, JSON as text, vectors as pgvector's
binary ``vector_send`` form).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from memstack.errors import DependencyFailed

Param = str | int | float | bool | bytes | None
Params = Mapping[str, Param]
Row = dict[str, Any]


class DuplicateKey(Exception):
    """An INSERT hit a unique key (SQLSTATE 23505); the store turns it into ``Conflict``."""


class StoreUnavailable(DependencyFailed):
    """The database could not be reached or dropped the connection; retrying later may succeed."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"the memory database is unavailable ({reason}); nothing was changed unless the "
            "request said so, and retrying it is safe"
        )


class SqlExecutor(Protocol):
    #: the largest request and result one statement may carry (``None``: no limit);
    #: the store splits larger batches (the Data API takes 4 MB in and 1 MB out)
    max_request_bytes: int | None
    max_result_bytes: int | None

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        """Run one statement and return its rows (an empty list for a statement without rows)."""
        ...

    def transaction(self) -> AbstractContextManager[SqlExecutor]:
        """Statements run on the executor it yields commit together, or roll back on an exception."""
        ...

    def close(self) -> None: ...


def vector_text(vector: Sequence[float] | np.ndarray | None) -> str | None:
    """pgvector's text form, exact for float32 (each component written at full precision)."""
    if vector is None:
        return None
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ",".join(repr(v) for v in values) + "]"


def vector_from_binary(data: bytes | memoryview | None) -> np.ndarray | None:
    """Decode ``vector_send``: int16 dimension, int16 unused, then big-endian float32s."""
    if data is None:
        return None
    return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
