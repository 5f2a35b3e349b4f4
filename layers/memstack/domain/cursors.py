"""List cursors a caller cannot forge: the store's cursor, signed for one tenant and user.

A store's cursor is its own position encoding (a timestamp and a row id, a
search_after list); decoded from a forged value it reached SQLite as an
integer too large for it (a 500). Every cursor the API returns is therefore
``<store cursor>.<HMAC>``, the HMAC over (tenant, user, store cursor) with
``Settings.cursor_secret``; a cursor whose signature does not match is refused
with 400 before the store sees it, and a cursor of one user is useless for
another. (Without a configured secret the key is a fixed one: the signature
then only detects corrupted or hand-edited cursors.)
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from memstack.errors import BadRequest

_FIXED_KEY = b"memstack-cursor-v1"
_SIG_BYTES = 16


class CursorSigner:
    def __init__(self, secret: str | None = None) -> None:
        self._key = secret.encode() if secret else _FIXED_KEY

    def _signature(self, tenant: str, user_id: str, inner: str) -> str:
        mac = hmac.new(self._key, f"{tenant}\x1f{user_id}\x1f{inner}".encode(), hashlib.sha256)
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
