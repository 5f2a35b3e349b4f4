"""List cursors checked before a store sees them: the store's cursor, sealed for one tenant and user.

A store's cursor is its own position encoding (a timestamp and a row id, a
search_after list); decoded from a forged value it reached SQLite as an
integer too large for it (a 500). Every cursor the API returns is therefore
``<store cursor>.<MAC>``, the HMAC over (tenant, user, store cursor); a cursor
whose MAC does not match (hand-edited, truncated, another user's) is refused
with 400 before the store sees it. The key is the deployment's own secret
(``adapters/cursor_key.py``: a generated file in the data directory locally,
a Secrets Manager secret in AWS), so a cursor cannot be forged at all: the
stores' range checks only ever see positions this deployment handed out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import threading
from collections.abc import Callable

from memstack.errors import BadRequest

_SIG_BYTES = 16


class CursorSigner:
    """Signs and checks cursors with ``key``: the bytes, or how to read them (once, on first use)."""

    def __init__(self, key: bytes | Callable[[], bytes]) -> None:
        self._source = key
        self._key: bytes | None = key if isinstance(key, bytes) else None
        self._lock = threading.Lock()

    def key(self) -> bytes:
        if self._key is None:
            with self._lock:
                if self._key is None:
                    assert callable(self._source)
                    self._key = self._source()
        return self._key

    def _signature(self, tenant: str, user_id: str, inner: str) -> str:
        mac = hmac.new(self.key(), f"{tenant}\x1f{user_id}\x1f{inner}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()[:_SIG_BYTES]).decode().rstrip("=")

    def sign(self, tenant: str, user_id: str, inner: str | None) -> str | None:
        """The cursor the API hands out for the store's ``inner`` cursor (None stays None)."""
        if inner is None:
            return None
        return f"{inner}.{self._signature(tenant, user_id, inner)}"

    def verify(self, tenant: str, user_id: str, cursor: str | None) -> str | None:
        """The store cursor inside ``cursor``; ``BadRequest`` unless this API signed it for this user."""
        if not cursor:
            return None
        inner, _, signature = cursor.rpartition(".")
        expected = self._signature(tenant, user_id, inner)
        if not inner or not hmac.compare_digest(signature.encode(), expected.encode()):
            raise BadRequest(
                "cursor is not one this API returned for this user",
                [{"field": "cursor", "location": "query", "message": "unknown cursor", "type": "bad_cursor"}],
            )
        return inner


def encode_position(created_at: float, key: object) -> str:
    """A store's "created_at|key" page position (the embedded and DynamoDB stores use it)."""
    return base64.urlsafe_b64encode(f"{created_at!r}|{key}".encode()).decode()


def decode_position(cursor: str) -> tuple[float, str]:
    """(created_at, key) from ``encode_position``; ``BadRequest`` for anything else or out of range."""
    try:
        created, key = base64.urlsafe_b64decode(cursor.encode()).decode().split("|", 1)
        when = float(created)
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise BadRequest("cursor is not one this API returned") from exc
    if not math.isfinite(when) or not key:
        raise BadRequest("cursor is not one this API returned")
    return when, key


def decode_row_position(cursor: str) -> tuple[float, int]:
    """``decode_position`` whose key is a SQLite row id (a 64-bit integer)."""
    when, key = decode_position(cursor)
    # ASCII digits only: "²" is a digit to ``str.isdigit`` and not to ``int`` (a forged cursor was a 500).
    if not (key.isascii() and key.isdigit()) or int(key) >= 2**63:
        raise BadRequest("cursor is not one this API returned")
    return when, int(key)
