"""Erase is final: a write made for a user from before the user's erasure is refused.

A job that was already running when ``DELETE /v1/users/{id}`` ran (it read
the message, then asked the model) would otherwise write its memories after
the erase, and the user would have data again. Work takes a ``Fence`` when it
begins (a job, a consolidation, an add: ``Fence.at(now)``) and hands it to
every write it makes (``store.put(records, fence=fence)``, ``supersede``, the
STM's ``append``); each store, in the same transaction (or condition) as the
write, refuses a write whose fence began before the user's last erasure: the
job fails with ``Erased``, is retried, and its retry finds nothing left to
work on. Writes without a fence (an import, an API edit, a test) are not
fenced. The fence is an argument, not ambient state, so a write's rule is
visible at its call and a new backend cannot miss it.

The erasure marker holds no user id: it is keyed by a hash of (tenant, user),
and it expires once no job from before the erase can still be running
(``Settings.job_idempotency_seconds``: SQS keeps a message at most that long).
"""

from __future__ import annotations

import hashlib

from memstack.errors import Conflict
from memstack.ports.store import Fence

__all__ = ["RETENTION_SECONDS", "Erased", "Fence", "erased_while_working", "erasure_key", "refuse_if_erased"]

#: how long an erasure marker is kept (SQS's longest retention, 4 days)
RETENTION_SECONDS = 345_600


class Erased(Conflict):
    code = "user_erased"


def erasure_key(tenant: str, user_id: str) -> str:
    return hashlib.blake2b(f"{tenant}\x1f{user_id}".encode(), digest_size=16).hexdigest()


def erased_while_working() -> Erased:
    """The error a store raises when its own condition (a transaction check, a SQL guard) refused a write."""
    return Erased(
        "the user was erased while this work was running; nothing of it is kept (retry to start anew)"
    )


def refuse_if_erased(fence: Fence | None, erased_at: float | None) -> None:
    """``Erased`` when the work writing (``fence``) began before the user's last erasure (``erased_at``)."""
    if fence is not None and erased_at is not None and fence.began < erased_at:
        raise erased_while_working()
